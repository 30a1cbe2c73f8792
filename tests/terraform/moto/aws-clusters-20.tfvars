# 20 clusters, the most a cluster set takes: planned (not applied) against moto
# by scripts/test-terraform; tests/terraform/moto/check_plan_quotas.py holds the planned role to
# IAM's quotas at their defaults. The last infraID has the 27 characters OpenShift allows.
infra_ids = [
  "c00-a1b2c",
  "c01-d3e4f",
  "c02-g5h6i",
  "c03-j7k8l",
  "c04-m9n0p",
  "c05-q1r2s",
  "c06-t3u4v",
  "c07-w5x6y",
  "c08-z7a8b",
  "c09-c9d0e",
  "c10-f1g2h",
  "c11-i3j4k",
  "c12-l5m6n",
  "c13-o7p8q",
  "c14-r9s0t",
  "c15-u1v2w",
  "c16-x3y4z",
  "c17-a5b6c",
  "c18-d7e8f",
  "a-twenty-one-char-nam-g9h0i",
]
initial_policies = {}
