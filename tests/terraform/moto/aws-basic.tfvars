# Inputs of infra/examples/aws-basic for the moto test (lambda_zip is passed by the script).
region       = "eu-west-1"
infra_id     = "mycluster-7xk2p"
architecture = "arm64"
# Exercises the extra_tag_actions statement (rendered, linted by parliament, evaluated).
extra_tag_actions = ["sns:TagResource"]
# Issue 35: one writable hosted zone and health check (the evaluator checks that they, and no other,
# are writable). parliament 1.6.4 wants every resource type the reference stars for an action
# matched by the statement (hostedzone* and healthcheck* for ChangeTagsForResource, though a call
# names one resource): a statement of zones alone is reported as "No resources match".
route53_hosted_zone_ids  = ["Z0123456789ABCDEFGHIJ"]
route53_health_check_ids = ["0123abcd-0000-1111-2222-333344445555"]
tags = {
  app  = "tagwarden"
  test = "moto"
}
