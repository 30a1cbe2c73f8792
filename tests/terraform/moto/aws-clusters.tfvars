# Inputs of infra/examples/aws-clusters for the moto test (lambda_zip is passed by the script); the
# three clusters are the example's defaults.
region       = "eu-west-1"
architecture = "arm64"
tags = {
  app  = "tagwarden"
  test = "moto"
}
