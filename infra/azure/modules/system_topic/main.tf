# Event Grid system topics, each created here or, when its source already has one, read and
# checked. "Only one Azure Event Grid system topic is allowed per source (like subscription,
# resource group, etc.)" (azure-docs, event-grid/system-topics.md), so a source that has a topic
# (the portal's, Defender's, another deployment's) gets no second one: the caller passes it with
# create = false and adds only its event subscriptions.
#
# A topic lives in its source's subscription ("It's not possible to create a system topic in an
# Azure subscription that's different from the event source's Azure subscription", ibid.). azurerm
# acts in its provider's one subscription, and a module cannot configure a provider per
# subscription, so a topic in another subscription is created (or read) by id with azapi, which
# creates a resource wherever its parent id points ("parent_id: The ID of the azure resource in
# which this resource is created": azapi_resource's schema, Azure/azapi 2.13 as the
# cdktn-provider-azapi 1.0.0 package carries it). API version 2022-06-15 is the Event Grid version
# azurerm 4.x uses (azure-rest-api-specs, specification/eventgrid/resource-manager/
# Microsoft.EventGrid/stable/2022-06-15/EventGrid.json: SystemTopicProperties source/topicType).
#
# Every topic has a system-assigned identity: the caller's event subscriptions dead-letter with it,
# without storage keys.

locals {
  home_created     = { for k, t in var.topics : k => t if t.create && t.subscription_id == null }
  home_existing    = { for k, t in var.topics : k => t if !t.create && t.subscription_id == null }
  foreign_created  = { for k, t in var.topics : k => t if t.create && t.subscription_id != null }
  foreign_existing = { for k, t in var.topics : k => t if !t.create && t.subscription_id != null }

  topics = merge(
    { for k, t in azurerm_eventgrid_system_topic.this : k => {
      id                  = t.id
      name                = t.name
      resource_group_name = t.resource_group_name
      principal_id        = t.identity[0].principal_id
    } },
    { for k, t in data.azurerm_eventgrid_system_topic.this : k => {
      id                  = t.id
      name                = t.name
      resource_group_name = t.resource_group_name
      principal_id        = t.identity[0].principal_id
    } },
    { for k, t in azapi_resource.this : k => {
      id                  = t.id
      name                = t.name
      resource_group_name = var.topics[k].resource_group_name
      principal_id        = t.identity[0].principal_id
    } },
    { for k, t in data.azapi_resource.this : k => {
      id                  = t.id
      name                = var.topics[k].name
      resource_group_name = var.topics[k].resource_group_name
      principal_id        = t.identity[0].principal_id
    } },
  )
}

# Created in the provider's subscription.
resource "azurerm_eventgrid_system_topic" "this" {
  for_each = local.home_created

  name                = each.value.name
  resource_group_name = each.value.resource_group_name
  location            = each.value.location # "global" for subscription, resource group and Resource Notifications topics
  source_resource_id  = each.value.source_resource_id
  topic_type          = each.value.topic_type

  identity {
    type = "SystemAssigned" # dead-lettering without storage keys
  }

  tags = var.tags
}

# Existing in the provider's subscription: read, and checked for source, type (Azure compares
# both without case; the documented CLI creates a Resource Notifications topic as
# `microsoft.resourcenotifications.resources`) and identity.
data "azurerm_eventgrid_system_topic" "this" {
  for_each = local.home_existing

  name                = each.value.name
  resource_group_name = each.value.resource_group_name

  lifecycle {
    postcondition {
      condition     = lower(self.source_resource_id) == lower(each.value.source_resource_id) && lower(self.topic_type) == lower(each.value.topic_type)
      error_message = "${var.existing_variable_name}[\"${each.key}\"] (${each.value.name}) is a ${self.topic_type} topic on ${self.source_resource_id}, not a ${each.value.topic_type} topic on ${each.value.source_resource_id}."
    }
    postcondition {
      condition     = length(self.identity) > 0 && strcontains(self.identity[0].type, "SystemAssigned")
      error_message = "${var.existing_variable_name}[\"${each.key}\"] (${each.value.name}) has no system-assigned identity; dead-lettering without storage keys needs one: az eventgrid system-topic update -g ${each.value.resource_group_name} -n ${each.value.name} --identity systemassigned."
    }
  }
}

# Created in another subscription, by parent id in that subscription's resource group.
resource "azapi_resource" "this" {
  for_each = local.foreign_created

  type      = "Microsoft.EventGrid/systemTopics@2022-06-15"
  name      = each.value.name
  parent_id = each.value.resource_group_id
  location  = each.value.location

  identity {
    type = "SystemAssigned"
  }

  body = {
    properties = {
      source    = each.value.source_resource_id
      topicType = each.value.topic_type
    }
  }

  tags = var.tags
}

# Existing in another subscription: read by id, checked as the data source above checks.
data "azapi_resource" "this" {
  for_each = local.foreign_existing

  type                   = "Microsoft.EventGrid/systemTopics@2022-06-15"
  resource_id            = "/subscriptions/${each.value.subscription_id}/resourceGroups/${each.value.resource_group_name}/providers/Microsoft.EventGrid/systemTopics/${each.value.name}"
  response_export_values = ["properties.source", "properties.topicType"]

  lifecycle {
    postcondition {
      condition     = lower(self.output.properties.source) == lower(each.value.source_resource_id) && lower(self.output.properties.topicType) == lower(each.value.topic_type)
      error_message = "${var.existing_variable_name}[\"${each.key}\"] (${each.value.name}) is a ${self.output.properties.topicType} topic on ${self.output.properties.source}, not a ${each.value.topic_type} topic on ${each.value.source_resource_id}."
    }
    postcondition {
      condition     = length(self.identity) > 0 && strcontains(self.identity[0].type, "SystemAssigned")
      error_message = "${var.existing_variable_name}[\"${each.key}\"] (${each.value.name}) has no system-assigned identity; dead-lettering without storage keys needs one: az eventgrid system-topic update --subscription ${each.value.subscription_id} -g ${each.value.resource_group_name} -n ${each.value.name} --identity systemassigned."
    }
  }
}
