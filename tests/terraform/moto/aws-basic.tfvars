# Inputs of infra/examples/aws-basic for the moto test (lambda_zip is passed by the script; its
# manifest says x86_64, and the function must run on x86_64 without being told).
region   = "eu-west-1"
infra_id = "mycluster-7xk2p"
# An explicitly given first policy (what `oc get infrastructure cluster -o yaml` prints),
# written once; check_aws_basic.py's `ownership` step then plays the publisher and changes it.
initial_policy = <<-EOT
  apiVersion: config.openshift.io/v1
  kind: Infrastructure
  metadata:
    name: cluster
  status:
    infrastructureName: mycluster-7xk2p
    platform: AWS
    platformStatus:
      type: AWS
      aws:
        region: eu-west-1
        resourceTags:
          - key: cost-center
            value: "4242"
  EOT
alarm_emails   = ["ops@example.com"]
create_trail   = true
# Exercises the extra_tag_actions statement (rendered, linted by parliament, evaluated).
extra_tag_actions = ["lambda:TagResource"]
# One writable hosted zone and health check (the evaluator checks that they, and no other,
# are writable). parliament 1.6.4 wants every resource type the reference stars for an action
# matched by the statement (hostedzone* and healthcheck* for ChangeTagsForResource, though a call
# names one resource): a statement of zones alone is reported as "No resources match".
route53_hosted_zone_ids  = ["Z0123456789ABCDEFGHIJ"]
route53_health_check_ids = ["0123abcd-0000-1111-2222-333344445555"]
tags = {
  app  = "tagwarden"
  test = "moto"
}
