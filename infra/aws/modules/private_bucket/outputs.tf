output "id" {
  description = "The bucket's name (its id)."
  value       = aws_s3_bucket.this.id
}

output "arn" {
  description = "The bucket's ARN."
  value       = aws_s3_bucket.this.arn
}

output "bucket_regional_domain_name" {
  description = "The bucket's regional domain name (for a CloudFormation template_url)."
  value       = aws_s3_bucket.this.bucket_regional_domain_name
}

output "policy_applied" {
  description = "The bucket policy's id, known once the policy is in place: depend on it before writing through the policy's grants."
  value       = aws_s3_bucket_policy.this.id
}

output "name" {
  description = "The bucket's name, as configured."
  value       = aws_s3_bucket.this.bucket
}
