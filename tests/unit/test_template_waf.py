"""The edge in front of the API: AWS WAF on the stage, and the stage's throttle as a ceiling.

API Gateway's stage throttle is one token bucket per method for every caller, so on
its own a single client that sends requests the app would refuse anyway (a foreign
Origin, a preflight, an address over its limit) takes every token, and every other
visitor gets API Gateway's 429. A WAF web ACL counts each address apart and blocks
it long before it can drain the stage's bucket; the stage throttle is then only a
ceiling on everyone together. cfn-lint checks these resources are well formed; these
tests check they are the right ones and agree with candor's own limits.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from candor.settings import Settings
from tests.unit.test_template import PARAMETERS, RESOURCES, TEMPLATE

pytestmark = pytest.mark.unit

# How many times what candor lets one address through the WAF must allow: the
# questions and ratings candor counts, and beside them the preflights (cached by the
# browser for ten minutes, candor.api.edge) and health checks it does not count.
MARGIN = 2


def default(parameter: str) -> int:
    return int(PARAMETERS[parameter]["Default"])


def web_acls() -> dict[str, dict[str, Any]]:
    return {k: v for k, v in RESOURCES.items() if v["Type"] == "AWS::WAFv2::WebACL"}


def web_acl() -> dict[str, Any]:
    (acl,) = web_acls().values()
    return acl


def rule(kind: str) -> dict[str, Any]:
    """The web ACL's one rule whose statement is of `kind`."""
    rules: list[dict[str, Any]] = web_acl()["Properties"]["Rules"]
    (found,) = [r for r in rules if kind in r["Statement"]]
    return found


def per_address_rate() -> tuple[int, int]:
    """(requests, seconds) one address may send before the WAF blocks it, by default."""
    statement = rule("RateBasedStatement")["Statement"]["RateBasedStatement"]
    limit = statement["Limit"]
    assert limit == {"Ref": "WafRateLimit"}
    return default("WafRateLimit"), int(statement["EvaluationWindowSec"])


def test_one_client_cannot_take_the_stage_throttle_from_every_visitor() -> None:
    # Given the stage's throttle, one bucket per method shared by every caller
    (settings,) = RESOURCES["Api"]["Properties"]["MethodSettings"]
    assert settings["ThrottlingRateLimit"] == {"Ref": "ApiRateLimit"}
    stage_rate = default("ApiRateLimit")

    # Then a web ACL on the stage counts each address apart, by default
    assert len(web_acls()) == 1
    assert PARAMETERS["Waf"]["Default"] == "create"
    requests, seconds = per_address_rate()
    # and one address is blocked long before it alone could drain the stage's
    # bucket: it takes at least twenty addresses, each at the WAF's limit, to reach it
    assert requests / seconds * 20 <= stage_rate
    # while the WAF never blocks an address that candor itself would still serve:
    # the sliding window lets up to twice the limit through in one window's span
    # (tests/unit/test_rate_windows.py), questions and ratings together
    candor = Settings()
    per_window = 2 * candor.rate_address_limit * MARGIN
    assert requests / seconds >= per_window / candor.rate_address_window_seconds


def test_the_web_acl_blocks_by_address_rate_and_by_amazons_ip_reputation_list() -> None:
    acl = web_acl()
    properties = acl["Properties"]
    assert acl["Condition"] == "CreateWebAcl"
    assert TEMPLATE["Conditions"]["CreateWebAcl"] == {"Fn::Equals": [{"Ref": "Waf"}, "create"]}
    assert PARAMETERS["Waf"]["AllowedValues"] == ["create", "none"]
    # A REST API's stage takes a regional web ACL; what no rule blocks goes through.
    assert properties["Scope"] == "REGIONAL"
    assert properties["DefaultAction"] == {"Allow": {}}

    reputation = rule("ManagedRuleGroupStatement")
    assert reputation["Statement"]["ManagedRuleGroupStatement"] == {
        "VendorName": "AWS",
        "Name": "AWSManagedRulesAmazonIpReputationList",
    }
    # The group's own actions (block) apply: a Count override would only watch.
    assert reputation["OverrideAction"] == {"None": {}}

    rate = rule("RateBasedStatement")
    statement = rate["Statement"]["RateBasedStatement"]
    # Each source address apart, every route and method counted (a preflight or a
    # refused request takes a stage token as much as a question does).
    assert statement["AggregateKeyType"] == "IP"
    assert "ScopeDownStatement" not in statement
    assert statement["EvaluationWindowSec"] in (60, 120, 300, 600)
    # AWS WAF's bounds for a rate-based rule's limit.
    assert PARAMETERS["WafRateLimit"]["MinValue"] >= 10
    # Blocked with a 429 and a JSON body shaped like candor's own refusals.
    block = rate["Action"]["Block"]["CustomResponse"]
    assert block["ResponseCode"] == 429
    assert {"Name": "Retry-After", "Value": str(statement["EvaluationWindowSec"])} in block[
        "ResponseHeaders"
    ]
    body = properties["CustomResponseBodies"][block["CustomResponseBodyKey"]]
    assert body["ContentType"] == "APPLICATION_JSON"
    assert json.loads(body["Content"])["reason"] == "rate_limited"
    # Reputation first: a listed address is refused without counting against anyone.
    assert reputation["Priority"] < rate["Priority"]
    for each in properties["Rules"]:
        assert each["VisibilityConfig"]["CloudWatchMetricsEnabled"] is True
        assert each["VisibilityConfig"]["SampledRequestsEnabled"] is True


def test_the_web_acl_is_associated_with_the_api_stage() -> None:
    (name,) = [k for k, v in RESOURCES.items() if v["Type"] == "AWS::WAFv2::WebACLAssociation"]
    association = RESOURCES[name]
    assert association["Condition"] == "CreateWebAcl"
    (acl,) = web_acls()
    assert association["Properties"]["WebACLArn"] == {"Fn::GetAtt": [acl, "Arn"]}
    # The stage's ARN; ${Api.Stage} makes CloudFormation create the stage first.
    assert association["Properties"]["ResourceArn"] == {
        "Fn::Sub": "arn:${AWS::Partition}:apigateway:${AWS::Region}::/restapis/${Api}/stages/"
        "${Api.Stage}"
    }


def test_the_stage_throttle_is_a_ceiling_well_above_one_addresss_limits() -> None:
    # The stage's bucket is shared by every caller: set low, a few clients fill it.
    # Set as a ceiling, it takes many addresses; reserved concurrency caps the spend.
    candor = Settings()
    per_address = candor.rate_address_limit / candor.rate_address_window_seconds
    assert default("ApiRateLimit") >= 100 * per_address
    assert default("ApiBurstLimit") >= default("ApiRateLimit")
