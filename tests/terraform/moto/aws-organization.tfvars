# Inputs of infra/examples/aws-organization for the moto test (lambda_zip is passed by the script):
# a hub in eu-west-1 (moto's default account, 123456789012) for two member accounts in two regions,
# one named cluster by cluster, the other as a whole, and a cluster of the hub account itself
# through its own spoke; no OUs (moto has no service-managed StackSets: the StackSet is checked by
# tests/terraform/aws/organization.tftest.hcl with a mocked provider).
region                         = "eu-west-1"
organization_id                = "o-a1b2c3d4e5"
member_regions                 = ["eu-west-1", "us-east-1"]
member_organizational_unit_ids = []
clusters                       = ["111122223333/prod-7xk2p", "444455556666/*", "123456789012/hub-a1b2c"]
account_clusters               = { "444455556666" = ["shop-3kd9s", "capi-east"] }
cluster_kinds                  = { "capi-east" = "ClusterAPI" }
contest_operators              = ["arn:aws:iam::123456789012:role/platform-oncall"]
auditor_principals             = ["arn:aws:iam::123456789012:role/platform-auditor"]
hub_spoke                      = true
tags = {
  app  = "tagwarden"
  test = "moto"
}
