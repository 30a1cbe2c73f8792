#!/usr/bin/env python3
"""moto_server (moto 5.2.5) over TLS, with four fixes that make it answer as AWS does.

Each fix is the smallest patch that removes a difference from AWS that the Terraform tests hit;
nothing here changes what the tests check, only what moto returns.

1. Bucket policies: moto ignores condition operators it does not implement (all but StringEquals)
   and treats them as matched, so the TLS-only statement (Deny s3:* when Bool aws:SecureTransport
   is "false") denied every object request. The server only speaks TLS (-s, self-signed), so
   aws:SecureTransport is "true" and that statement does not apply, as in AWS.
2. SQS RedrivePolicy: AWS returns compact JSON; moto returns `json.dumps` with spaces, which the
   provider reports as a change on every plan.
3. Lambda DeadLetterConfig: moto drops it, so every plan wants to add it again. Stored and returned.
4. EventBridge schedule-only rules: moto matches them against every PutEvents event (no pattern =
   match all) and then fails (HTTP 500) on their Lambda target. AWS never routes events to them.
5. Bucket policies again: moto judges an object request against the bucket policy without the
   request's principal (S3 `get_permission(action, resource)`), so a statement conditioned on the
   principal (aws:PrincipalTag/…, aws:PrincipalOrgID, aws:PrincipalAccount, aws:PrincipalArn, as
   the organization hub's Denies are) matches every request, the allowed publisher's included. Such
   a statement cannot be judged here: it does not apply in moto, and tests/iam's evaluator judges
   it for each principal instead (tests/iam/check_organization_policies.py).
6. IAM roles made by CloudFormation: moto keeps their inline policies as parsed JSON, not text,
   and GetAccountAuthorizationDetails then fails (HTTP 500) quoting them. Kept as JSON text, as
   IAM's PutRolePolicy stores them.
7. SQS event source mappings: on each message sent, moto receives a batch for the mapped Lambda
   function and tries to run it, which it cannot without Docker; a batch it takes for run is
   deleted, so a message can vanish unprocessed. Off: the tests hand mapped queues' messages to the
   function themselves (tests/terraform/readme_deploy/standins.py, sqs-deliver), as Lambda polls.
8. StackSets: moto drops AutoDeployment and Capabilities, so DescribeStackSet answers without
   them and every plan replaces a service-managed StackSet (`auto_deployment` forces replacement
   in the provider). Stored from CreateStackSet and UpdateStackSet and returned.

usage: moto_server.py -H 127.0.0.1 -p PORT -s   (the moto_server arguments)
"""
import json

from moto.awslambda import models as lambda_models
from moto.cloudformation import responses as cfn_responses
from moto.events import models as events_models
from moto.iam import access_control as ac
from moto.iam import models as iam_models
from moto.server import main
from moto.sqs import models as sqs_models

# 1 ------------------------------------------------------------------------------------------------
_is_action_permitted = ac.IAMPolicyStatement.is_action_permitted
SECURE_TRANSPORT = "true"  # the server only speaks TLS


def _secure_transport_matches(condition):
    """None when the condition is not only Bool aws:SecureTransport; else whether it matches."""
    if set(condition) != {"Bool"} or set(condition["Bool"]) != {"aws:SecureTransport"}:
        return None
    want = condition["Bool"]["aws:SecureTransport"]
    want = want if isinstance(want, list) else [want]
    return SECURE_TRANSPORT in [str(w).lower() for w in want]


PRINCIPAL_KEYS = ("aws:principaltag/", "aws:principalorgid", "aws:principalaccount", "aws:principalarn")


def _names_the_principal(condition):
    """Whether a condition reads a context key of the request's principal (fix 5)."""
    return any(str(key).lower().startswith(PRINCIPAL_KEYS) for values in condition.values() if isinstance(values, dict)
               for key in values)


def is_action_permitted(self, action, resource="*", principal=None, incoming_condition_values=None):
    cond = self._statement.get("Condition")
    if cond and _secure_transport_matches(cond) is False:
        return ac.PermissionResult.NEUTRAL  # the statement does not apply to this request
    if cond and principal is None and not incoming_condition_values and _names_the_principal(cond):
        return ac.PermissionResult.NEUTRAL  # fix 5: not judged without the principal
    return _is_action_permitted(self, action, resource, principal, incoming_condition_values)


ac.IAMPolicyStatement.is_action_permitted = is_action_permitted

# 2 ------------------------------------------------------------------------------------------------
_queue_attributes = sqs_models.Queue.attributes.fget


def queue_attributes(self):
    result = _queue_attributes(self)
    if self.redrive_policy:
        result["RedrivePolicy"] = json.dumps(self.redrive_policy, separators=(",", ":"))
    return result


sqs_models.Queue.attributes = property(queue_attributes)

# 3 ------------------------------------------------------------------------------------------------
_fn_init = lambda_models.LambdaFunction.__init__
_fn_get_configuration = lambda_models.LambdaFunction.get_configuration
_fn_update_configuration = lambda_models.LambdaFunction.update_configuration


def fn_init(self, *args, **kwargs):
    _fn_init(self, *args, **kwargs)
    spec = kwargs.get("spec") if "spec" in kwargs else args[1]
    self.tw_dead_letter_config = spec.get("DeadLetterConfig") or None


def fn_get_configuration(self, *args, **kwargs):
    config = _fn_get_configuration(self, *args, **kwargs)
    if getattr(self, "tw_dead_letter_config", None) and self.tw_dead_letter_config.get("TargetArn"):
        config["DeadLetterConfig"] = self.tw_dead_letter_config
    return config


def fn_update_configuration(self, config_updates):
    if "DeadLetterConfig" in config_updates:
        self.tw_dead_letter_config = config_updates["DeadLetterConfig"] or None
    return _fn_update_configuration(self, config_updates)


lambda_models.LambdaFunction.__init__ = fn_init
lambda_models.LambdaFunction.get_configuration = fn_get_configuration
lambda_models.LambdaFunction.update_configuration = fn_update_configuration

# 4 ------------------------------------------------------------------------------------------------
_send_to_targets = events_models.Rule.send_to_targets


def send_to_targets(self, original_event, transform_input=True):
    if self.scheduled_expression and self.event_pattern.dump() is None:
        return
    return _send_to_targets(self, original_event, transform_input)


events_models.Rule.send_to_targets = send_to_targets

# 6 ------------------------------------------------------------------------------------------------
_role_policy_list = iam_models.Role.role_policy_list.fget


def role_policy_list(self):
    self.policies = {k: v if isinstance(v, str) else json.dumps(v) for k, v in self.policies.items()}
    return _role_policy_list(self)


iam_models.Role.role_policy_list = property(role_policy_list)

# 7 ------------------------------------------------------------------------------------------------
_add_message = sqs_models.Queue.add_message


def add_message(self, message):
    mappings, self.lambda_event_source_mappings = self.lambda_event_source_mappings, {}
    try:
        _add_message(self, message)
    finally:
        self.lambda_event_source_mappings = mappings


sqs_models.Queue.add_message = add_message

# 8 ------------------------------------------------------------------------------------------------
STACK_SET_KEPT = {"AutoDeployment": "auto_deployment", "Capabilities": "capabilities"}


def _keep_stack_set_settings(original):
    def call(self):
        result = original(self)
        stack_set = self.cloudformation_backend.describe_stack_set(self._get_param("StackSetName"))
        for param, attr in STACK_SET_KEPT.items():
            value = self._get_param(param)
            if value is not None:
                setattr(stack_set, attr, value)
        return result

    return call


cfn_responses.CloudFormationResponse.create_stack_set = _keep_stack_set_settings(
    cfn_responses.CloudFormationResponse.create_stack_set)
cfn_responses.CloudFormationResponse.update_stack_set = _keep_stack_set_settings(
    cfn_responses.CloudFormationResponse.update_stack_set)

if __name__ == "__main__":
    main()
