output "ids" {
  description = "The event subscriptions' resource ids, by the caller's key (azurerm's and azapi's)."
  value = merge(
    { for k, s in azurerm_eventgrid_system_topic_event_subscription.this : k => s.id },
    { for k, s in azapi_resource.this : k => s.id },
  )
}
