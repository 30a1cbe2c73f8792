# Inputs of infra/examples/aws-basic for the moto test (lambda_zip is passed by the script).
region       = "eu-west-1"
infra_id     = "mycluster-7xk2p"
architecture = "arm64"
# Exercises the extra_tag_actions statement (rendered, linted by parliament, evaluated).
extra_tag_actions = ["sns:TagResource"]
# Issue 35: one writable hosted zone (the evaluator checks that it, and no other zone, is writable).
route53_hosted_zone_ids = ["Z0123456789ABCDEFGHIJ"]
tags = {
  app  = "tagwarden"
  test = "moto"
}
