output "arn" {
  description = "The queue's ARN."
  value       = aws_sqs_queue.this.arn
}

output "id" {
  description = "The queue's URL (its id)."
  value       = aws_sqs_queue.this.id
}

output "url" {
  description = "The queue's URL."
  value       = aws_sqs_queue.this.url
}

output "name" {
  description = "The queue's name."
  value       = aws_sqs_queue.this.name
}

output "visibility_timeout_seconds" {
  description = "The queue's visibility timeout."
  value       = aws_sqs_queue.this.visibility_timeout_seconds
}

output "fifo_queue" {
  description = "Whether the queue (and its dead-letter queue) are FIFO."
  value       = aws_sqs_queue.this.fifo_queue && alltrue(aws_sqs_queue.dlq[*].fifo_queue)
}

output "sqs_managed_sse_enabled" {
  description = "Whether the queues are encrypted with SSE-SQS (false: SSE-KMS with `kms_key_arn`)."
  value       = aws_sqs_queue.this.sqs_managed_sse_enabled
}

output "dlq_arn" {
  description = "The dead-letter queue's ARN (null without `create_dlq`)."
  value       = one(aws_sqs_queue.dlq[*].arn)
}

output "dlq_id" {
  description = "The dead-letter queue's URL, its id (null without `create_dlq`)."
  value       = one(aws_sqs_queue.dlq[*].id)
}

output "dlq_url" {
  description = "The dead-letter queue's URL (null without `create_dlq`)."
  value       = one(aws_sqs_queue.dlq[*].url)
}

output "dlq_name" {
  description = "The dead-letter queue's name (null without `create_dlq`)."
  value       = one(aws_sqs_queue.dlq[*].name)
}
