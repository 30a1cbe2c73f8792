# Inputs of infra/examples/aws-clusters for the moto test (lambda_zip is passed by the script).
region    = "eu-west-1"
infra_ids = ["dev-a1b2c", "stage-d3e4f", "prod-g5h6i"]
# First policies, written once (given, not defaulted); each cluster's publisher owns its
# own afterwards.
initial_policies = {
  "dev-a1b2c"   = "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata: {name: cluster}\nstatus:\n  infrastructureName: dev-a1b2c\n  platform: AWS\n  platformStatus: {type: AWS, aws: {region: eu-west-1, resourceTags: [{key: environment, value: dev}]}}\n"
  "stage-d3e4f" = "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata: {name: cluster}\nstatus:\n  infrastructureName: stage-d3e4f\n  platform: AWS\n  platformStatus: {type: AWS, aws: {region: eu-west-1, resourceTags: [{key: environment, value: stage}]}}\n"
  "prod-g5h6i"  = "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata: {name: cluster}\nstatus:\n  infrastructureName: prod-g5h6i\n  platform: AWS\n  platformStatus: {type: AWS, aws: {region: eu-west-1, resourceTags: [{key: environment, value: prod}]}}\n"
}
tags = {
  app  = "tagwarden"
  test = "moto"
}
