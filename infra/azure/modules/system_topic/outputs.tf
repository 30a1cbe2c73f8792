output "topics" {
  description = "Every topic, created or existing, by the caller's key: `id`, `name`, `resource_group_name` and `principal_id` (its system-assigned identity, which dead-letters without storage keys)."
  value       = local.topics
}

output "ids" {
  description = "The topics' resource ids, by the caller's key."
  value       = { for k, t in local.topics : k => t.id }
}

output "names" {
  description = "The topics' names, by the caller's key."
  value       = { for k, t in local.topics : k => t.name }
}
