#!/usr/bin/env python3
"""Check what `infra/examples/aws-clusters` (one deployment, three clusters) created in
moto (run by scripts/test-terraform after its apply).

usage: check_aws_clusters.py <terraform-output.json>

The role is judged as IAM would decide (check_aws_basic's evaluator over the inline policy and the
attached managed policies): each listed cluster's owned resources are writable, a fourth cluster's
and unowned ones are not. Then Tag Change events are routed through moto's EventBridge: each listed
cluster's reach the queue, a foreign cluster's do not.
Prints one "PASS <check>" / "FAIL <check>: <why>" line per check; exits 1 if any failed.
Environment: MOTO_ENDPOINT (https://127.0.0.1:<port>, self-signed).
"""
import json
import sys
import time
import uuid

from check_aws_basic import REGION, allowed_by, check, client, failures, role_document

CLUSTERS = ["dev-a1b2c", "stage-d3e4f", "prod-g5h6i"]  # infra/examples/aws-clusters defaults
FOREIGN = "other-x9y8z"
ACCOUNT = "123456789012"


def write_cases(bucket):
    """(case, action, ARN, request context, allowed?)."""
    def owned(cluster, keys=("team",)):
        return {f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned", "aws:TagKeys": list(keys)}

    i = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0123456789abcdef0"
    role = f"arn:aws:iam::{ACCOUNT}:role/some-role"
    cases = []
    for c in CLUSTERS:
        cases += [
            (f"EC2 instance owned by {c}", "ec2:CreateTags", i, owned(c), True),
            (f"IAM role owned by {c}", "iam:TagRole", role, owned(c), True),
            (f"EC2 instance owned by {c}, writing Name", "ec2:CreateTags", i, owned(c, ["Name"]), False),
            (f"{c}'s bucket", "s3:PutBucketTagging", f"arn:aws:s3:::{c}-image-registry-{REGION}-abc", {"s3:ResourceAccount": ACCOUNT}, True),
            # A case variant of a listed cluster's ownership key is refused, as is Cluster API's.
            (f"EC2 instance owned by {c}, writing Kubernetes.io/cluster/{FOREIGN}", "ec2:CreateTags", i,
             owned(c, ["Kubernetes.io/cluster/" + FOREIGN]), False),
            (f"IAM role owned by {c}, writing KUBERNETES.IO/CLUSTER/<another listed cluster>", "iam:TagRole", role,
             owned(c, [f"KUBERNETES.IO/CLUSTER/{CLUSTERS[(CLUSTERS.index(c) + 1) % len(CLUSTERS)]}".upper()]), False),
            (f"IAM role owned by {c}, writing Sigs.K8s.io/cluster-api-provider-aws/cluster/x", "iam:TagRole", role,
             owned(c, ["Sigs.K8s.io/cluster-api-provider-aws/cluster/x"]), False),
            # Route 53: no zone is listed in this example, so no Route 53 tag write at all.
            (f"{c}: a hosted zone", "route53:ChangeTagsForResource", "arn:aws:route53:::hostedzone/Z0123456789ABCDEFGHIJ", {}, False),
            (f"{c}'s status report", "s3:PutObject", f"arn:aws:s3:::{bucket}/clusters/{c}/tagwarden-status.json", {}, True),
            (f"{c}'s policy (the function never writes it)", "s3:PutObject", f"arn:aws:s3:::{bucket}/clusters/{c}/10-cluster.yaml", {}, False),
            (f"{c}'s policy read", "s3:GetObject", f"arn:aws:s3:::{bucket}/clusters/{c}/10-cluster.yaml", {}, True),
        ]
    cases += [
        (f"EC2 instance owned by {FOREIGN} (not in the set)", "ec2:CreateTags", i, owned(FOREIGN), False),
        (f"IAM role owned by {FOREIGN}", "iam:TagRole", role, owned(FOREIGN), False),
        ("EC2 instance owned by nobody", "ec2:CreateTags", i, {"aws:TagKeys": ["team"]}, False),
        (f"{FOREIGN}'s bucket", "s3:PutBucketTagging", f"arn:aws:s3:::{FOREIGN}-image-registry", {"s3:ResourceAccount": ACCOUNT}, False),
    ]
    return cases


def tag_change(cluster, marker):
    return {
        "Source": "aws.tag", "DetailType": "Tag Change on Resource", "EventBusName": "default",
        "Resources": [f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-{marker[:17]}"],
        "Detail": json.dumps({"changed-tag-keys": ["team"], "service": "ec2", "resource-type": "instance",
                              "version": 1, "marker": marker,
                              "tags": {f"kubernetes.io/cluster/{cluster}": "owned", "team": "x"}}),
    }


def main():
    tf = {k: v["value"] for k, v in json.load(open(sys.argv[1])).items()}
    out = tf["tagwarden"]
    s3, iam, cw, lam, events, sqs = (client(s) for s in ("s3", "iam", "cloudwatch", "lambda", "events", "sqs"))
    bucket = out["policy_bucket_name"]

    def one_function_reads_the_set():
        env = lam.get_function_configuration(FunctionName=out["function_name"])["Environment"]["Variables"]
        want = f"s3://{bucket}/clusters/*/"
        if out["policy_uri"] != want or env["TAGWARDEN_POLICY"] != want or out["function_name"] != "tagwarden":
            return f"policy_uri {out['policy_uri']}, env {env['TAGWARDEN_POLICY']}, function {out['function_name']}"
        if sorted(out["infra_ids"]) != sorted(CLUSTERS):
            return f"infra_ids {out['infra_ids']}"
        # The function enforces exactly the listed infraIDs.
        if sorted(env.get("TAGWARDEN_CLUSTERS", "").split(",")) != sorted(CLUSTERS):
            return f"TAGWARDEN_CLUSTERS {env.get('TAGWARDEN_CLUSTERS')}"
        return None

    def each_cluster_policy_in_its_folder():
        for c in CLUSTERS:
            body = s3.get_object(Bucket=bucket, Key=f"clusters/{c}/10-cluster.yaml")["Body"].read().decode()
            if f"infrastructureName: {c}" not in body:
                return f"clusters/{c}/10-cluster.yaml lacks infrastructureName: {c}"
        # Only policy documents under the set's prefix trigger a sweep: one configuration
        # per suffix (a filter holds one prefix and one suffix rule).
        confs = s3.get_bucket_notification_configuration(Bucket=bucket)["LambdaFunctionConfigurations"]
        filters = sorted(tuple(sorted((r["Name"].lower(), r["Value"]) for r in c["Filter"]["Key"]["FilterRules"])) for c in confs)
        want = sorted(((("prefix", "clusters/"), ("suffix", sfx))) for sfx in (".json", ".yaml", ".yml"))
        if filters != want or {c["LambdaFunctionArn"] for c in confs} != {out["function_arn"]}:
            return f"notification filters {filters}, want {want}"
        return None

    def one_write_policy_per_cluster():
        _, inline, attached = role_document(iam, out["role_name"])
        # Two clusters to a policy, named by position (three clusters: two policies).
        want = ["tagwarden-tag-writes-01", "tagwarden-tag-writes-02"]
        if inline != ["tagwarden"] or attached != want:
            return f"inline {inline}, attached {attached}, want {want}"
        if sorted(out["tag_write_policy_arns"]) != sorted(CLUSTERS):
            return f"tag_write_policy_arns {out['tag_write_policy_arns']}"
        return None

    # moto does not enforce IAM's size quotas; AWS refuses a larger policy at apply. "Role policy
    # size: 10,240 characters" (all inline policies together) and "Managed policy size: 6,144
    # characters"; "IAM doesn't count white space" (IAM User Guide, "IAM and AWS STS quotas").
    def policies_within_iam_size_quotas():
        sizes = {}
        for name in iam.list_role_policies(RoleName=out["role_name"])["PolicyNames"]:
            doc = iam.get_role_policy(RoleName=out["role_name"], PolicyName=name)["PolicyDocument"]
            sizes[f"inline {name}"] = (len("".join(json.dumps(doc).split())), 10240)
        for a in iam.list_attached_role_policies(RoleName=out["role_name"])["AttachedPolicies"]:
            v = iam.get_policy(PolicyArn=a["PolicyArn"])["Policy"]["DefaultVersionId"]
            doc = iam.get_policy_version(PolicyArn=a["PolicyArn"], VersionId=v)["PolicyVersion"]["Document"]
            text = doc if isinstance(doc, str) else json.dumps(doc)
            sizes[a["PolicyName"]] = (len("".join(text.split())), 6144)
        print("     sizes (characters without white space / quota): " + ", ".join(f"{k} {n}/{q}" for k, (n, q) in sizes.items()))
        over = [k for k, (n, q) in sizes.items() if n > q]
        return f"over the quota: {over}" if over else None

    def role_writes_exactly_the_listed_clusters():
        doc = role_document(iam, out["role_name"])[0]
        wrong = []
        for case, action, arn, ctx, want in write_cases(bucket):
            sid = allowed_by(doc, action, arn, ctx)
            if bool(sid) != want:
                wrong.append(f"{case}: {'allowed by ' + sid if sid else 'denied'}, want {'allowed' if want else 'denied'}")
        return "; ".join(wrong) or None

    def alarms_per_cluster():
        want = ({f"tagwarden-{c}-write-failures" for c in CLUSTERS} | {f"tagwarden-{c}-compliance-lag-p99" for c in CLUSTERS}
                | {f"tagwarden-{c}-contested" for c in CLUSTERS}
                | {"tagwarden-policy-rejected", "tagwarden-listing-failures", "tagwarden-lambda-errors", "tagwarden-dlq-not-empty",
                   "tagwarden-no-events", "tagwarden-no-sweep"})
        got = {a["AlarmName"]: a for a in cw.describe_alarms(AlarmNamePrefix="tagwarden-")["MetricAlarms"]}
        if set(got) != want:
            return f"alarms: extra {sorted(set(got) - want)} missing {sorted(want - set(got))}"
        for c in CLUSTERS:
            dims = {d["Name"]: d["Value"] for d in got[f"tagwarden-{c}-compliance-lag-p99"]["Dimensions"]}
            if dims != {"Cloud": "aws", "InfraID": c}:
                return f"{c} lag alarm dimensions {dims}"
            if f"InfraID = '{c}'" not in got[f"tagwarden-{c}-write-failures"]["Metrics"][0]["Expression"]:
                return f"{c} write-failures query {got[f'tagwarden-{c}-write-failures']['Metrics']}"
        for name in ("tagwarden-policy-rejected", "tagwarden-listing-failures"):
            if "InfraID = 'all'" not in got[name]["Metrics"][0]["Expression"]:
                return f"{name} must watch the deployment's InfraID 'all'"
        # A set's silence is the deployment's (EventsReceived and SweepsCompleted carry
        # InfraID "all": crates/core/src/report/metrics.rs, by_cluster).
        for name in ("tagwarden-no-events", "tagwarden-no-sweep"):
            dims = {d["Name"]: d["Value"] for d in got[name]["Dimensions"]}
            if dims != {"Cloud": "aws", "InfraID": "all"}:
                return f"{name} dimensions {dims}"
        return None

    def dashboard_line_per_cluster():
        text = json.dumps(json.loads(cw.get_dashboard(DashboardName=out["dashboard_name"])["DashboardBody"]))
        for c in CLUSTERS + ["all"]:
            if f'InfraID=\\"{c}\\"' not in text:
                return f"no line for InfraID {c}"
        return None

    # moto cannot run the placeholder function: stop the mapping, then read the queue directly.
    def tag_changes_routed_by_owner():
        for m in lam.list_event_source_mappings(FunctionName=out["function_name"])["EventSourceMappings"]:
            lam.update_event_source_mapping(UUID=m["UUID"], Enabled=False)
        sent = {}
        for c in CLUSTERS + [FOREIGN]:
            marker = uuid.uuid4().hex
            sent[marker] = c
            r = events.put_events(Entries=[tag_change(c, marker)])
            if r.get("FailedEntryCount"):
                return f"PutEvents failed {r}"
        got, deadline = set(), time.time() + 10
        while time.time() < deadline and len(got) < len(CLUSTERS):
            for msg in sqs.receive_message(QueueUrl=out["events_queue_url"], MaxNumberOfMessages=10,
                                           WaitTimeSeconds=1).get("Messages", []):
                got.add(sent.get(json.loads(msg["Body"]).get("detail", {}).get("marker")))
                sqs.delete_message(QueueUrl=out["events_queue_url"], ReceiptHandle=msg["ReceiptHandle"])
        if got != set(CLUSTERS):
            return f"queued the changes of {sorted(str(g) for g in got)}, want exactly {CLUSTERS}"
        return None

    for name, fn in [
        ("one function reads the cluster set s3://<bucket>/clusters/*/", one_function_reads_the_set),
        ("each cluster's policy in its own folder; notifications for the whole set", each_cluster_policy_in_its_folder),
        ("one attached tag-write policy per cluster", one_write_policy_per_cluster),
        ("role writes exactly the listed clusters' owned resources (IAM evaluation)", role_writes_exactly_the_listed_clusters),
        ("role policies within IAM's size quotas", policies_within_iam_size_quotas),
        ("alarms per cluster (write failures, compliance lag) and once for the deployment", alarms_per_cluster),
        ("dashboard: a line per cluster and for the deployment", dashboard_line_per_cluster),
        ("Tag Change events of listed clusters reach the queue, a foreign cluster's do not", tag_changes_routed_by_owner),
    ]:
        check(name, fn)
    if failures:
        print(f"check_aws_clusters: {len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
