# Inputs of infra/examples/aws-basic for the moto test (lambda_zip is passed by the script).
region       = "eu-west-1"
infra_id     = "mycluster-7xk2p"
architecture = "arm64"
tags = {
  app  = "tagwarden"
  test = "moto"
}
