"""Put on c7n's PYTHONPATH by scripts/bench only (Python imports ``sitecustomize`` at startup).

moto answers an unpaginated DescribeInstances for ~10,000 instances in about two minutes (it
renders every instance; it ignores MaxResults), longer than botocore's default 60 s read timeout,
so c7n would time out and retry forever-ish. Raise the default read timeout; nothing else changes.
"""

import botocore.config

botocore.config.Config.OPTION_DEFAULTS["read_timeout"] = 900
