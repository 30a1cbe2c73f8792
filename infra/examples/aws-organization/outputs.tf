output "organization_uri" {
  description = "Where member clusters publish: <uri><their account>/<infraID>/."
  value       = module.organization.organization_uri
}

output "hub_event_bus_arn" {
  description = "The bus the spokes forward to."
  value       = module.organization.hub_event_bus_arn
}

output "stack_set_name" {
  description = "The StackSet of spokes."
  value       = module.organization.stack_set_name
}

output "function_name" {
  description = "The hub's function."
  value       = module.tagwarden.function_name
}

output "organization" {
  description = "All outputs of the organization module (modules/member's inputs among them)."
  value       = module.organization
}
