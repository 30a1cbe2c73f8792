# A fourth cluster added to infra/examples/aws-clusters: one list entry (planned, not applied), with
# its first policy beside the three that exist.
infra_ids = ["dev-a1b2c", "stage-d3e4f", "prod-g5h6i", "qa-j7k8l"]
initial_policies = {
  "dev-a1b2c"   = "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata: {name: cluster}\nstatus:\n  infrastructureName: dev-a1b2c\n  platform: AWS\n  platformStatus: {type: AWS, aws: {region: eu-west-1, resourceTags: [{key: environment, value: dev}]}}\n"
  "stage-d3e4f" = "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata: {name: cluster}\nstatus:\n  infrastructureName: stage-d3e4f\n  platform: AWS\n  platformStatus: {type: AWS, aws: {region: eu-west-1, resourceTags: [{key: environment, value: stage}]}}\n"
  "prod-g5h6i"  = "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata: {name: cluster}\nstatus:\n  infrastructureName: prod-g5h6i\n  platform: AWS\n  platformStatus: {type: AWS, aws: {region: eu-west-1, resourceTags: [{key: environment, value: prod}]}}\n"
  "qa-j7k8l"    = "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata: {name: cluster}\nstatus:\n  infrastructureName: qa-j7k8l\n  platform: AWS\n  platformStatus: {type: AWS, aws: {region: eu-west-1, resourceTags: [{key: environment, value: qa}]}}\n"
}
