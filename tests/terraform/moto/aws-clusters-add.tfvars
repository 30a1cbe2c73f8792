# A fourth cluster added to infra/examples/aws-clusters: one list entry (planned, not applied).
clusters = {
  "dev-a1b2c"   = { team = "platform", environment = "dev" }
  "stage-d3e4f" = { team = "platform", environment = "stage" }
  "prod-g5h6i"  = { team = "platform", environment = "prod", cost-center = "4711" }
  "qa-j7k8l"    = { team = "platform", environment = "qa" }
}
