# 20 clusters, the most a cluster set takes (issue 24 item 4): planned (not applied) against moto
# by scripts/test-terraform; tests/terraform/moto/check_plan_quotas.py holds the planned role to
# IAM's quotas at their defaults. The last infraID has the 27 characters OpenShift allows.
clusters = {
  "c00-a1b2c"                   = { team = "platform" }
  "c01-d3e4f"                   = { team = "platform" }
  "c02-g5h6i"                   = { team = "platform" }
  "c03-j7k8l"                   = { team = "platform" }
  "c04-m9n0p"                   = { team = "platform" }
  "c05-q1r2s"                   = { team = "platform" }
  "c06-t3u4v"                   = { team = "platform" }
  "c07-w5x6y"                   = { team = "platform" }
  "c08-z7a8b"                   = { team = "platform" }
  "c09-c9d0e"                   = { team = "platform" }
  "c10-f1g2h"                   = { team = "platform" }
  "c11-i3j4k"                   = { team = "platform" }
  "c12-l5m6n"                   = { team = "platform" }
  "c13-o7p8q"                   = { team = "platform" }
  "c14-r9s0t"                   = { team = "platform" }
  "c15-u1v2w"                   = { team = "platform" }
  "c16-x3y4z"                   = { team = "platform" }
  "c17-a5b6c"                   = { team = "platform" }
  "c18-d7e8f"                   = { team = "platform" }
  "a-twenty-one-char-nam-g9h0i" = { team = "platform" }
}
