output "arn" {
  description = "The role's ARN, for the rule targets' role_arn."
  value       = aws_iam_role.this.arn
}

output "name" {
  description = "The role's name."
  value       = aws_iam_role.this.name
}
