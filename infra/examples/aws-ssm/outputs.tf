output "function_name" {
  description = "The tagwarden function."
  value       = module.tagwarden.function_name
}

output "policy_uri" {
  description = "Where the function reads its policy (ssm:/...)."
  value       = module.tagwarden.policy_uri
}

output "policy_parameter_name" {
  description = "Edit the policy here (or through this configuration)."
  value       = module.tagwarden.policy_parameter_name
}

output "event_patterns" {
  description = "The EventBridge patterns in force."
  value       = module.tagwarden.event_patterns
}

output "dashboard_name" {
  description = "CloudWatch dashboard."
  value       = module.tagwarden.dashboard_name
}
