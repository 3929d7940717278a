"""What cfn-lint cannot see in infra/template.yaml: that it points at real code and real settings.

cfn-lint checks the template's shape (`make lint` runs it). It accepts a runtime
that does not exist, a handler module that is not there, an environment variable
that no setting reads and a misspelt throttling key; these tests do not.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi import FastAPI
from pydantic import ValidationError

from candor.api.edge import require_production_edge
from candor.settings import DEFAULT_PRICES, Settings

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_PATH = ROOT / "infra" / "template.yaml"
RUNTIME = "python3.12"
# API Gateway HTTP APIs end every integration after 30 s, whatever the function does.
HTTP_API_LIMIT_SECONDS = 30
ENV_PREFIX = str(Settings.model_config.get("env_prefix", "")).upper()
ENV_NESTED_DELIMITER = str(Settings.model_config.get("env_nested_delimiter", "__"))


class CloudFormationLoader(yaml.SafeLoader):
    """A safe YAML loader that reads short-form intrinsics as their long form.

    `!Ref X` becomes {"Ref": "X"}, `!GetAtt A.B` becomes {"Fn::GetAtt": ["A", "B"]},
    `!Sub s` becomes {"Fn::Sub": "s"}, and so on for every `!Name` tag.
    """


def _construct_intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    key = suffix if suffix in {"Ref", "Condition"} else f"Fn::{suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = str(value).split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    else:
        raise yaml.constructor.ConstructorError(None, None, f"unexpected node {node!r}")
    return {key: value}


CloudFormationLoader.add_multi_constructor("!", _construct_intrinsic)


def load_template() -> dict[str, Any]:
    document: dict[str, Any] = yaml.load(TEMPLATE_PATH.read_text(), Loader=CloudFormationLoader)
    return document


TEMPLATE = load_template()
RESOURCES: dict[str, dict[str, Any]] = TEMPLATE["Resources"]
PARAMETERS: dict[str, dict[str, Any]] = TEMPLATE.get("Parameters", {})
FUNCTIONS = sorted(k for k, v in RESOURCES.items() if v["Type"] == "AWS::Serverless::Function")
LAYERS = sorted(k for k, v in RESOURCES.items() if v["Type"] == "AWS::Serverless::LayerVersion")
HTTP_APIS = {k for k, v in RESOURCES.items() if v["Type"] == "AWS::Serverless::HttpApi"}


def function_properties(logical_id: str) -> dict[str, Any]:
    """A function's properties with Globals merged in, as SAM merges them."""
    globals_: dict[str, Any] = TEMPLATE.get("Globals", {}).get("Function", {})
    own: dict[str, Any] = RESOURCES[logical_id].get("Properties", {})
    merged = {**globals_, **own}
    merged["Environment"] = {
        "Variables": {
            **globals_.get("Environment", {}).get("Variables", {}),
            **own.get("Environment", {}).get("Variables", {}),
        }
    }
    return merged


def environment(logical_id: str) -> dict[str, Any]:
    variables: dict[str, Any] = function_properties(logical_id)["Environment"]["Variables"]
    return variables


def http_api_events(logical_id: str) -> dict[str, dict[str, Any]]:
    events: dict[str, dict[str, Any]] = function_properties(logical_id).get("Events", {})
    return {name: e.get("Properties", {}) for name, e in events.items() if e["Type"] == "HttpApi"}


# The functions behind the HTTP API (the ingest function answers S3 events instead).
API_FUNCTIONS = [f for f in FUNCTIONS if http_api_events(f)]


def code_path(logical_id: str) -> Path:
    code_uri: str = function_properties(logical_id)["CodeUri"]
    return (TEMPLATE_PATH.parent / code_uri).resolve()


def handler_file(logical_id: str) -> tuple[Path, str]:
    """The file of the handler's module and the handler's name in it."""
    module, _, name = function_properties(logical_id)["Handler"].rpartition(".")
    return code_path(logical_id) / (module.replace(".", "/") + ".py"), name


def setting_field(env_name: str) -> str:
    """CANDOR_PRICES__GPT_4O_MINI -> prices."""
    return env_name.removeprefix(ENV_PREFIX).split(ENV_NESTED_DELIMITER)[0].lower()


def resolved(value: Any) -> str | None:
    """A literal, or a parameter's default; None when only a deployment can tell."""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in PARAMETERS:
        default = PARAMETERS[value["Ref"]].get("Default")
        return None if default is None else str(default)
    return None


def test_the_template_has_the_functions_and_layer_the_tests_walk() -> None:
    # Guards the parametrised tests below against passing because they saw nothing.
    assert {"AskFunction", "FeedbackFunction", "IngestFunction"} <= set(FUNCTIONS)
    assert LAYERS == ["CandorLayer"]
    assert {"HttpApi"} == HTTP_APIS


@pytest.mark.parametrize("logical_id", FUNCTIONS)
def test_function_runs_on_python_3_12(logical_id: str) -> None:
    assert function_properties(logical_id)["Runtime"] == RUNTIME


def test_layer_is_built_for_and_compatible_with_python_3_12() -> None:
    layer = RESOURCES["CandorLayer"]
    assert layer["Properties"]["CompatibleRuntimes"] == [RUNTIME]
    # Built by layers/candor/Makefile, with the runtime's interpreter.
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    makefile = (ROOT / "layers" / "candor" / "Makefile").read_text()
    assert f"PYTHON ?= {RUNTIME}\n" in makefile
    assert "build-CandorLayer:" in makefile


@pytest.mark.parametrize("logical_id", FUNCTIONS)
def test_function_handler_is_defined_in_its_code_uri(logical_id: str) -> None:
    path, name = handler_file(logical_id)
    assert path.is_file(), f"{logical_id}: no {path.relative_to(ROOT)}"
    module = ast.parse(path.read_text(), filename=str(path))
    defined = {
        node.name
        for node in module.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    } | {
        target.id
        for node in module.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    assert name in defined, f"{logical_id}: {path.name} defines no {name!r}"


def test_layer_content_uri_holds_the_package_and_its_requirements() -> None:
    content = (
        TEMPLATE_PATH.parent / RESOURCES["CandorLayer"]["Properties"]["ContentUri"]
    ).resolve()
    assert (content / "candor" / "__init__.py").is_file()
    assert (content / "requirements.txt").is_file()
    # The Makefile builds the layer from these two (tests/integration/test_layer_build.py).
    present = {
        p.name for p in content.iterdir() if p.suffix != ".egg-info" and p.name != "__pycache__"
    }
    assert present == {"candor", "requirements.txt", "Makefile"}


@pytest.mark.parametrize("logical_id", FUNCTIONS)
def test_every_candor_variable_names_a_setting(logical_id: str) -> None:
    fields = set(Settings.model_fields)
    unknown = {
        name
        for name in environment(logical_id)
        if name.startswith(ENV_PREFIX) and setting_field(name) not in fields
    }
    assert not unknown, f"{logical_id}: no setting reads {sorted(unknown)}"


@pytest.mark.parametrize("logical_id", FUNCTIONS)
def test_candor_variables_parse_as_settings(
    logical_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    values = {
        name: value
        for name, raw in environment(logical_id).items()
        if name.startswith(ENV_PREFIX)
        and setting_field(name) in Settings.model_fields
        and (value := resolved(raw)) is not None
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)

    settings = Settings()

    assert values, f"{logical_id}: no literal CANDOR_* values to check"
    for name, value in values.items():
        parsed = getattr(settings, setting_field(name))
        if isinstance(parsed, str):
            assert parsed == value, name


def test_model_parameters_offer_only_priced_models() -> None:
    # An unpriced model is a configuration error at the first question.
    for parameter in ("ChatModel", "EmbeddingModel"):
        offered = {*PARAMETERS[parameter]["AllowedValues"], PARAMETERS[parameter]["Default"]}
        assert offered <= set(DEFAULT_PRICES), parameter


@pytest.mark.parametrize("logical_id", FUNCTIONS)
def test_ssm_parameters_are_readable_by_the_functions_given_them(logical_id: str) -> None:
    # A missing grant passes every linter and fails as AccessDenied at cold start.
    given = {
        value["Ref"]
        for name, value in environment(logical_id).items()
        if name.endswith("_PARAMETER") and isinstance(value, dict) and "Ref" in value
    }
    granted = set()
    for policy in function_properties(logical_id).get("Policies", []):
        if not isinstance(policy, dict):
            continue
        for statement in policy.get("Statement", []):
            actions = statement["Action"]
            if "ssm:GetParameter" not in ([actions] if isinstance(actions, str) else actions):
                continue
            for resource in statement["Resource"]:
                granted |= {p for p in given if f"parameter${{{p}}}" in resource.get("Fn::Sub", "")}
    assert granted == given


def test_the_ask_function_serves_the_http_api() -> None:
    assert "AskFunction" in API_FUNCTIONS


@pytest.mark.parametrize("logical_id", API_FUNCTIONS)
def test_api_functions_stop_before_the_gateway_gives_up(logical_id: str) -> None:
    events = http_api_events(logical_id)
    timeout = function_properties(logical_id)["Timeout"]
    assert timeout < HTTP_API_LIMIT_SECONDS
    for event in events.values():
        assert timeout * 1000 < event.get("TimeoutInMillis", HTTP_API_LIMIT_SECONDS * 1000)


@pytest.mark.parametrize("logical_id", FUNCTIONS)
def test_api_routes_belong_to_the_configured_http_api(logical_id: str) -> None:
    # An event without ApiId makes SAM create a second API, with no CORS and no throttling.
    for name, event in http_api_events(logical_id).items():
        assert event.get("ApiId", {}).get("Ref") in HTTP_APIS, f"{logical_id}.{name}"


def fastapi_app(logical_id: str) -> FastAPI:
    path, _ = handler_file(logical_id)
    spec = importlib.util.spec_from_file_location(f"template_check_{logical_id}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    app = module.app
    assert isinstance(app, FastAPI)
    return app


@pytest.mark.parametrize("logical_id", API_FUNCTIONS)
def test_api_routes_exist_in_the_function_app(
    logical_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The handler refuses to start without these (test_api_functions_get_...).
    monkeypatch.setenv("CANDOR_ALLOWED_ORIGINS", "https://docs.example.com")
    monkeypatch.setenv("CANDOR_SESSION_SECRET_PARAMETER", "/candor/session-secret")
    events = http_api_events(logical_id)
    # The OpenAPI document lists every route the app serves, however routers nest.
    paths: dict[str, dict[str, Any]] = fastapi_app(logical_id).openapi()["paths"]
    served = {(method.upper(), path) for path, methods in paths.items() for method in methods}
    for name, event in events.items():
        route = (event["Method"].upper(), event["Path"])
        assert route in served, f"{logical_id}.{name}: the app does not serve {route}"


def test_http_api_throttles_every_route_by_default() -> None:
    # cfn-lint passes a misspelt key here, which would leave the API unthrottled.
    settings = RESOURCES["HttpApi"]["Properties"]["DefaultRouteSettings"]
    assert {"ThrottlingRateLimit", "ThrottlingBurstLimit"} <= set(settings)


def test_http_api_allows_only_the_configured_origins() -> None:
    cors = RESOURCES["HttpApi"]["Properties"]["CorsConfiguration"]
    assert cors["AllowOrigins"] == {"Fn::Split": [",", {"Ref": "AllowedOrigins"}]}
    assert "Default" not in PARAMETERS["AllowedOrigins"]
    # A page reads the trace id of an error and when to retry only if they are exposed.
    assert {"x-trace-id", "retry-after"} <= set(cors["ExposeHeaders"])


@pytest.mark.parametrize("logical_id", API_FUNCTIONS)
def test_api_functions_get_what_the_edge_cannot_start_without(
    logical_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    variables = environment(logical_id)
    # The same origins as the gateway's CORS: the app refuses the others itself.
    assert variables["CANDOR_ALLOWED_ORIGINS"] == {"Ref": "AllowedOrigins"}
    # Secrets by SSM name only: never a value in the template or the environment.
    assert variables["CANDOR_SESSION_SECRET_PARAMETER"] == {"Ref": "SessionSecretParameter"}
    assert variables["CANDOR_API_KEYS_PARAMETER"] == {"Ref": "ApiKeysParameter"}
    assert not {"CANDOR_SESSION_SECRET", "CANDOR_API_KEYS"} & set(variables)
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    monkeypatch.setenv(
        "CANDOR_ALLOWED_ORIGINS", "https://docs.example.com,https://example.com:8443"
    )
    monkeypatch.setenv(
        "CANDOR_SESSION_SECRET_PARAMETER", str(PARAMETERS["SessionSecretParameter"]["Default"])
    )
    monkeypatch.setenv("CANDOR_API_KEYS_PARAMETER", str(PARAMETERS["ApiKeysParameter"]["Default"]))
    require_production_edge(Settings())


@pytest.mark.parametrize(
    ("origins", "accepted"),
    [
        ("https://docs.example.com", True),
        ("https://docs.example.com,http://localhost:8000", True),
        ("https://docs.example.com/", False),
        ("https://docs.example.com/chat", False),
        ("*", False),
    ],
)
def test_the_allowed_origins_parameter_takes_what_the_setting_takes(
    origins: str, accepted: bool
) -> None:
    pattern = PARAMETERS["AllowedOrigins"]["AllowedPattern"]
    assert bool(re.fullmatch(pattern, origins)) is accepted
    try:
        Settings(allowed_origins=origins)
        parsed = True
    except ValidationError:
        parsed = False
    assert parsed is accepted


# -- the documents bucket and the ingest function ---------------------------------

# The bucket's name, as the template builds it from the stack's id; the ingest
# function's policy must name the same bucket without a !Ref (see the template).
STACK_UUID = {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}


def policy_statements(logical_id: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in function_properties(logical_id).get("Policies", [])
        if isinstance(policy, dict)
        for statement in policy.get("Statement", [])
    ]


def test_ingest_function_follows_uploads_and_deletes_in_the_documents_bucket() -> None:
    events = function_properties("IngestFunction")["Events"]
    s3_events = [e["Properties"] for e in events.values() if e["Type"] == "S3"]
    assert s3_events == [
        {
            "Bucket": {"Ref": "DocumentsBucket"},
            "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"],
        }
    ]


def test_documents_bucket_is_named_from_the_stack_id() -> None:
    name = RESOURCES["DocumentsBucket"]["Properties"]["BucketName"]
    assert name == {"Fn::Join": ["-", ["candor-docs", STACK_UUID]]}


def test_ingest_function_may_only_read_the_documents_bucket() -> None:
    s3 = [s for s in policy_statements("IngestFunction") if str(s["Action"]).startswith("s3:")]
    granted = {s["Action"]: s["Resource"] for s in s3}
    assert granted == {
        "s3:GetObject": {
            "Fn::Sub": [
                "arn:${AWS::Partition}:s3:::candor-docs-${StackUuid}/*",
                {"StackUuid": STACK_UUID},
            ]
        },
        "s3:ListBucket": {
            "Fn::Sub": [
                "arn:${AWS::Partition}:s3:::candor-docs-${StackUuid}",
                {"StackUuid": STACK_UUID},
            ]
        },
    }
    assert all(s["Effect"] == "Allow" for s in s3)


def test_ingest_function_may_read_and_write_state_items_and_nothing_more() -> None:
    dynamodb = [s for s in policy_statements("IngestFunction") if "dynamodb:" in str(s["Action"])]
    assert [(s["Action"], s["Resource"]) for s in dynamodb] == [
        (["dynamodb:GetItem", "dynamodb:UpdateItem"], {"Fn::GetAtt": ["StateTable", "Arn"]})
    ]


def test_documents_bucket_is_private_encrypted_and_kept() -> None:
    bucket = RESOURCES["DocumentsBucket"]
    properties = bucket["Properties"]
    assert set(properties["PublicAccessBlockConfiguration"].values()) == {True}
    assert len(properties["PublicAccessBlockConfiguration"]) == 4
    (rule,) = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in {"AES256", "aws:kms"}
    assert bucket["DeletionPolicy"] == "Retain"
    policy = RESOURCES["DocumentsBucketPolicy"]["Properties"]
    assert policy["Bucket"] == {"Ref": "DocumentsBucket"}
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_ingest_function_has_time_for_a_long_document_and_a_small_concurrency() -> None:
    properties = function_properties("IngestFunction")
    assert 120 <= properties["Timeout"] <= 900
    assert properties["ReservedConcurrentExecutions"] == {
        "Fn::If": [
            "ReserveIngestConcurrency",
            {"Ref": "IngestReservedConcurrency"},
            {"Ref": "AWS::NoValue"},
        ]
    }
    assert 1 <= PARAMETERS["IngestReservedConcurrency"]["Default"] <= 5
    assert properties["EventInvokeConfig"]["MaximumRetryAttempts"] <= 2


def test_ingest_size_limit_parses_as_a_setting() -> None:
    limit = environment("IngestFunction")["CANDOR_INGEST_MAX_BYTES"]
    assert Settings(ingest_max_bytes=limit).ingest_max_bytes == 20 * 1024 * 1024
