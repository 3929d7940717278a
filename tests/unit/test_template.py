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
from decimal import Decimal
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
# API Gateway ends a buffered integration after 29 s, whatever the function does.
BUFFERED_LIMIT_SECONDS = 29
STREAMING_INVOCATION = (
    "arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2021-11-15/functions/"
    "${%s.Arn}/response-streaming-invocations"
)
BUFFERED_INVOCATION = (
    "arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/"
    "${%s.Arn}/invocations"
)
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
REST_APIS = {k for k, v in RESOURCES.items() if v["Type"] == "AWS::Serverless::Api"}


def function_properties(logical_id: str) -> dict[str, Any]:
    """A function's properties with Globals merged in, as SAM merges them."""
    globals_: dict[str, Any] = TEMPLATE.get("Globals", {}).get("Function", {})
    own: dict[str, Any] = RESOURCES[logical_id].get("Properties", {})
    merged = {**globals_, **own}
    # SAM appends a function's layers to the global ones.
    merged["Layers"] = [*globals_.get("Layers", []), *own.get("Layers", [])]
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


def api_routes() -> dict[tuple[str, str], dict[str, Any]]:
    """(METHOD, path) -> its OpenAPI operation, for every route of the REST API."""
    paths: dict[str, dict[str, Any]] = RESOURCES["Api"]["Properties"]["DefinitionBody"]["paths"]
    return {
        (method.upper(), path): operation
        for path, operations in paths.items()
        for method, operation in operations.items()
    }


def integration(route: tuple[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = api_routes()[route]["x-amazon-apigateway-integration"]
    return found


def route_function(route: tuple[str, str]) -> str:
    """The function a route's integration invokes, by its logical id."""
    uri = integration(route)["uri"]["Fn::Sub"]
    (function,) = re.findall(r"\$\{([A-Za-z0-9]+)\.Arn\}", uri)
    return str(function)


def function_routes(logical_id: str) -> list[tuple[str, str]]:
    return sorted(r for r in api_routes() if route_function(r) == logical_id)


# The functions behind the API (the ingest function answers S3 events instead).
API_FUNCTIONS = sorted({route_function(route) for route in api_routes()})


def code_path(logical_id: str) -> Path:
    code_uri: str = function_properties(logical_id)["CodeUri"]
    return (TEMPLATE_PATH.parent / code_uri).resolve()


def runs_under_the_web_adapter(logical_id: str) -> bool:
    return environment(logical_id).get("AWS_LAMBDA_EXEC_WRAPPER") == "/opt/bootstrap"


def handler_file(logical_id: str) -> tuple[Path, str]:
    """The file of the handler's module and the handler's name in it.

    Under the web adapter the handler is a start-up script and the function's
    code is app.py's `app`, which the script serves.
    """
    if runs_under_the_web_adapter(logical_id):
        return code_path(logical_id) / "app.py", "app"
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
    assert {"Api"} == REST_APIS
    assert API_FUNCTIONS == ["AskFunction", "FeedbackFunction"]


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


def test_the_api_is_a_regional_rest_api_and_no_http_api_is_left() -> None:
    # Only REST APIs stream a Lambda response; an HTTP API would buffer it.
    properties = RESOURCES["Api"]["Properties"]
    assert properties["EndpointConfiguration"] == {"Type": "REGIONAL"}
    assert not [k for k, v in RESOURCES.items() if v["Type"] == "AWS::Serverless::HttpApi"]
    assert not [
        f
        for f in FUNCTIONS
        if "Events" in RESOURCES[f]["Properties"]
        and any(
            e["Type"] in {"Api", "HttpApi"} for e in RESOURCES[f]["Properties"]["Events"].values()
        )
    ]


def test_every_route_the_widget_and_owners_need_is_wired() -> None:
    assert set(api_routes()) == {
        ("POST", "/ask"),
        ("OPTIONS", "/ask"),
        ("POST", "/ask/stream"),
        ("OPTIONS", "/ask/stream"),
        ("GET", "/health"),
        ("POST", "/feedback"),
        ("OPTIONS", "/feedback"),
        ("POST", "/server/ask"),
        ("POST", "/server/ask/stream"),
        ("POST", "/handoff"),
        ("OPTIONS", "/handoff"),
        ("GET", "/widget/config"),
        ("POST", "/mcp"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
    }
    assert function_routes("FeedbackFunction") == [("OPTIONS", "/feedback"), ("POST", "/feedback")]


@pytest.mark.parametrize("route", sorted(api_routes()), ids=" ".join)
def test_every_route_is_a_proxy_integration_of_a_function(route: tuple[str, str]) -> None:
    wired = integration(route)
    assert wired["type"] == "aws_proxy"
    assert wired["httpMethod"] == "POST"  # Lambda is always invoked with POST
    assert route_function(route) in FUNCTIONS


@pytest.mark.parametrize("logical_id", API_FUNCTIONS)
def test_api_gateway_may_invoke_each_function_it_routes_to(logical_id: str) -> None:
    # A missing permission passes every linter and answers 500 at the first request.
    permissions = [
        r["Properties"]
        for r in RESOURCES.values()
        if r["Type"] == "AWS::Lambda::Permission"
        and r["Properties"]["FunctionName"] == {"Ref": logical_id}
    ]
    assert len(permissions) == 1
    (permission,) = permissions
    assert permission["Action"] == "lambda:InvokeFunction"  # and InvokeWithResponseStream
    assert permission["Principal"] == "apigateway.amazonaws.com"
    assert "${Api}/" in permission["SourceArn"]["Fn::Sub"]


@pytest.mark.parametrize("route", function_routes("AskFunction"), ids=" ".join)
def test_the_ask_functions_routes_stream_through_its_streaming_invocation(
    route: tuple[str, str],
) -> None:
    # Under the adapter in response_stream mode the function answers in Lambda's
    # streaming format on every route, which only this integration reads.
    wired = integration(route)
    assert wired["uri"] == {"Fn::Sub": STREAMING_INVOCATION % "AskFunction"}
    assert wired["responseTransferMode"] == "STREAM"


@pytest.mark.parametrize("route", function_routes("FeedbackFunction"), ids=" ".join)
def test_the_feedback_function_is_invoked_buffered(route: tuple[str, str]) -> None:
    wired = integration(route)
    assert wired["uri"] == {"Fn::Sub": BUFFERED_INVOCATION % "FeedbackFunction"}
    assert wired.get("responseTransferMode", "BUFFERED") == "BUFFERED"


def test_the_ask_function_runs_the_app_in_uvicorn_under_the_web_adapter() -> None:
    properties = function_properties("AskFunction")
    variables = environment("AskFunction")
    assert variables["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert variables["AWS_LWA_INVOKE_MODE"] == "response_stream"
    port = variables["AWS_LWA_PORT"]
    assert port.isdigit() and port != "9001"  # 9001 is the Lambda runtime API's port
    # The start-up command exists, is executable, and serves the adapted app on that port.
    script = code_path("AskFunction") / properties["Handler"]
    assert script.is_file() and os.access(script, os.X_OK)
    text = script.read_text()
    assert "uvicorn app:web" in text
    assert '--port "${AWS_LWA_PORT' in text
    assert "--host 127.0.0.1" in text
    # The adapter waits for its readiness check before the first request: a public GET.
    assert ("GET", variables["AWS_LWA_READINESS_CHECK_PATH"]) in api_routes()


def test_the_web_adapter_layer_is_the_published_one_for_the_functions_architecture() -> None:
    properties = function_properties("AskFunction")
    assert properties["Architectures"] == ["x86_64"]
    layers = properties["Layers"]
    assert {"Ref": "CandorLayer"} in layers
    (adapter,) = [layer for layer in layers if isinstance(layer, dict) and "Fn::If" in layer]
    condition, published, given = adapter["Fn::If"]
    assert condition == "PublishedWebAdapter"
    assert TEMPLATE["Conditions"]["PublishedWebAdapter"] == {
        "Fn::Equals": [{"Ref": "WebAdapterLayerArn"}, ""]
    }
    assert given == {"Ref": "WebAdapterLayerArn"}
    arn = published["Fn::Sub"]
    # AWS's account that publishes the adapter, its x86_64 layer, a pinned version.
    assert re.fullmatch(
        r"arn:\$\{AWS::Partition\}:lambda:\$\{AWS::Region\}:753240598075:layer:"
        r"LambdaAdapterLayerX86:\d+",
        arn,
    )
    # An ARN the parameter takes is one the owner can pin instead.
    pattern = PARAMETERS["WebAdapterLayerArn"]["AllowedPattern"]
    concrete = arn.replace("${AWS::Partition}", "aws").replace("${AWS::Region}", "eu-west-1")
    assert re.fullmatch(pattern, concrete)
    assert re.fullmatch(pattern, "")


def test_the_ask_module_serves_its_app_adapted_for_the_web_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from candor.api.lambda_web import AdaptedInvocations

    monkeypatch.setenv("CANDOR_ALLOWED_ORIGINS", "https://docs.example.com")
    monkeypatch.setenv("CANDOR_SESSION_SECRET_PARAMETER", "/candor/session-secret")
    module = function_module("AskFunction")
    assert isinstance(module.web, AdaptedInvocations)
    assert module.web.app is module.app


@pytest.mark.parametrize("logical_id", API_FUNCTIONS)
def test_api_functions_stop_before_the_gateway_gives_up(logical_id: str) -> None:
    timeout = function_properties(logical_id)["Timeout"]
    assert timeout < BUFFERED_LIMIT_SECONDS


def function_module(logical_id: str) -> Any:
    path, _ = handler_file(logical_id)
    spec = importlib.util.spec_from_file_location(f"template_check_{logical_id}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fastapi_app(logical_id: str) -> FastAPI:
    app = function_module(logical_id).app
    assert isinstance(app, FastAPI)
    return app


def app_path(logical_id: str, path: str) -> str:
    """The path the app sees: the adapter strips AWS_LWA_REMOVE_BASE_PATH."""
    base = environment(logical_id).get("AWS_LWA_REMOVE_BASE_PATH")
    return path.removeprefix(base) if base and path.startswith(f"{base}/") else path


@pytest.mark.parametrize("logical_id", API_FUNCTIONS)
def test_api_routes_exist_in_the_function_app(
    logical_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The handler refuses to start without these (test_api_functions_get_...).
    monkeypatch.setenv("CANDOR_ALLOWED_ORIGINS", "https://docs.example.com")
    monkeypatch.setenv("CANDOR_SESSION_SECRET_PARAMETER", "/candor/session-secret")
    # The OpenAPI document lists every route the app serves, however routers nest.
    paths: dict[str, dict[str, Any]] = fastapi_app(logical_id).openapi()["paths"]
    served = {(method.upper(), path) for path, methods in paths.items() for method in methods}
    for method, path in function_routes(logical_id):
        if method == "OPTIONS":
            continue  # the edge answers preflights for every path (below)
        route = (method, app_path(logical_id, path))
        assert route in served, f"{logical_id}: the app does not serve {route}"


@pytest.mark.parametrize("logical_id", API_FUNCTIONS)
def test_browser_routes_answer_the_preflight_of_an_allowed_origin_only(
    logical_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    from candor.api.edge import EXPOSE_HEADERS

    allowed = "https://docs.example.com"
    monkeypatch.setenv("CANDOR_ALLOWED_ORIGINS", allowed)
    monkeypatch.setenv("CANDOR_SESSION_SECRET", "template-test-session-secret-0123456789")
    http = TestClient(fastapi_app(logical_id))
    browser_routes = [
        path
        for method, path in function_routes(logical_id)
        if method == "POST" and "security" not in api_routes()[(method, path)]
    ]
    assert browser_routes
    for path in browser_routes:
        assert ("OPTIONS", path) in api_routes(), f"no preflight route for {path}"
        preflight = {"Origin": allowed, "Access-Control-Request-Method": "POST"}
        answered = http.options(path, headers=preflight)
        assert answered.status_code == 204, path
        assert answered.headers["access-control-allow-origin"] == allowed
        foreign = http.options(path, headers=preflight | {"Origin": "https://evil.example"})
        assert foreign.status_code == 403, path
        assert "access-control-allow-origin" not in foreign.headers
    # A page reads the trace id of an error and when to retry only if they are exposed.
    assert {"x-trace-id", "retry-after"} <= {h.strip() for h in EXPOSE_HEADERS.split(",")}


def test_the_stage_throttles_every_method_from_the_parameters() -> None:
    # cfn-lint passes a misspelt key here, which would leave the API unthrottled.
    (settings,) = RESOURCES["Api"]["Properties"]["MethodSettings"]
    assert settings["ResourcePath"] == "/*"
    assert settings["HttpMethod"] == "*"
    assert settings["ThrottlingRateLimit"] == {"Ref": "ApiRateLimit"}
    assert settings["ThrottlingBurstLimit"] == {"Ref": "ApiBurstLimit"}


def test_server_routes_need_the_optional_usage_plans_key() -> None:
    definition = RESOURCES["Api"]["Properties"]["DefinitionBody"]
    scheme = definition["components"]["securitySchemes"]["ServerApiKey"]
    assert scheme == {"type": "apiKey", "name": "x-api-key", "in": "header"}
    assert definition["x-amazon-apigateway-api-key-source"] == "HEADER"
    keyed = sorted(route for route, op in api_routes().items() if "security" in op)
    assert keyed == [
        ("GET", "/v1/models"),
        ("POST", "/mcp"),
        ("POST", "/server/ask"),
        ("POST", "/server/ask/stream"),
        ("POST", "/v1/chat/completions"),
    ]
    assert all(api_routes()[r]["security"] == [{"ServerApiKey": []}] for r in keyed)
    # The adapter strips the prefix, so the app serves them as /ask and /ask/stream.
    assert environment("AskFunction")["AWS_LWA_REMOVE_BASE_PATH"] == "/server"
    # The key, its plan and their link exist only when the owner asks for them.
    plan = {"ServerApiKey", "ServerUsagePlan", "ServerUsagePlanKey"}
    assert {RESOURCES[name]["Condition"] for name in plan} == {"CreateServerUsagePlan"}
    assert TEMPLATE["Conditions"]["CreateServerUsagePlan"] == {
        "Fn::Equals": [{"Ref": "ServerAccess"}, "create"]
    }
    assert PARAMETERS["ServerAccess"]["Default"] == "none"
    usage = RESOURCES["ServerUsagePlan"]["Properties"]
    assert usage["ApiStages"] == [{"ApiId": {"Ref": "Api"}, "Stage": {"Ref": "Api.Stage"}}]
    assert usage["Throttle"] == {
        "RateLimit": {"Ref": "ServerRateLimit"},
        "BurstLimit": {"Ref": "ServerBurstLimit"},
    }
    assert usage["Quota"] == {"Limit": {"Ref": "ServerDailyQuota"}, "Period": "DAY"}
    link = RESOURCES["ServerUsagePlanKey"]["Properties"]
    assert link == {
        "KeyId": {"Ref": "ServerApiKey"},
        "KeyType": "API_KEY",
        "UsagePlanId": {"Ref": "ServerUsagePlan"},
    }


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


def test_ingest_function_may_read_and_write_only_its_own_state_items() -> None:
    # Its completion records, the corpus version and the document catalogue, by their
    # partition keys; tests/integration/test_ingest_policy.py checks these are the
    # keys it touches.
    dynamodb = [s for s in policy_statements("IngestFunction") if "dynamodb:" in str(s["Action"])]
    assert [(s["Effect"], s["Action"], s["Resource"], s["Condition"]) for s in dynamodb] == [
        (
            "Allow",
            ["dynamodb:GetItem", "dynamodb:UpdateItem"],
            {"Fn::GetAtt": ["StateTable", "Arn"]},
            {
                "ForAllValues:StringLike": {
                    "dynamodb:LeadingKeys": ["corpus#*", "ingest#*", "catalogue#*"]
                }
            },
        )
    ]


def test_ask_function_may_query_only_the_catalogue() -> None:
    # The catalogue node reads an index's catalogue with one Query (paged) of its
    # partition (backends/dynamodb_catalogue.py); no other item may be queried.
    queries = [s for s in policy_statements("AskFunction") if "dynamodb:Query" in str(s["Action"])]
    assert [(s["Effect"], s["Action"], s["Resource"], s["Condition"]) for s in queries] == [
        (
            "Allow",
            "dynamodb:Query",
            {"Fn::GetAtt": ["StateTable", "Arn"]},
            {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["catalogue#*"]}},
        )
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


def test_the_budget_shares_and_the_network_limit_reach_the_functions() -> None:
    ask, feedback = environment("AskFunction"), environment("FeedbackFunction")
    for variable, parameter, condition in [
        ("CANDOR_BUDGET_ADDRESS_USD", "AddressBudgetUsd", "SetAddressBudget"),
        ("CANDOR_BUDGET_NETWORK_USD", "NetworkBudgetUsd", "SetNetworkBudget"),
    ]:
        # Left empty, the variable is not set and the setting's default (a part of
        # the daily budget) holds: an empty value would not parse as a number.
        assert ask[variable] == {"Fn::If": [condition, {"Ref": parameter}, {"Ref": "AWS::NoValue"}]}
        assert TEMPLATE["Conditions"][condition] == {
            "Fn::Not": [{"Fn::Equals": [{"Ref": parameter}, ""]}]
        }
        assert PARAMETERS[parameter]["Default"] == ""
    # Ratings count against the same rate limits as questions.
    assert ask["CANDOR_RATE_NETWORK_LIMIT"] == {"Ref": "NetworkRateLimit"}
    assert feedback["CANDOR_RATE_NETWORK_LIMIT"] == {"Ref": "NetworkRateLimit"}
    assert (
        PARAMETERS["NetworkRateLimit"]["Default"]
        == Settings.model_fields["rate_network_limit"].default
    )


@pytest.mark.parametrize("value", ["0.25", "3", "0", "1.000001"])
def test_a_budget_share_the_parameter_accepts_parses_as_a_setting(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for parameter, variable in [
        ("AddressBudgetUsd", "CANDOR_BUDGET_ADDRESS_USD"),
        ("NetworkBudgetUsd", "CANDOR_BUDGET_NETWORK_USD"),
    ]:
        assert re.fullmatch(PARAMETERS[parameter]["AllowedPattern"], value)
        monkeypatch.setenv(variable, value)
    settings = Settings()
    assert settings.budget_address_usd == settings.budget_network_usd == Decimal(value)


def test_the_follow_up_window_is_a_parameter_of_the_ask_function() -> None:
    # The defect: no HistoryTtlSeconds parameter, so a deployment could set
    # CANDOR_HISTORY_TTL_SECONDS only by editing the function's environment by hand.
    ask = environment("AskFunction")
    assert ask["CANDOR_HISTORY_TTL_SECONDS"] == {"Ref": "HistoryTtlSeconds"}
    parameter = PARAMETERS["HistoryTtlSeconds"]
    assert parameter["Type"] == "Number"
    assert parameter["Default"] == Settings.model_fields["history_ttl_seconds"].default


@pytest.mark.parametrize("logical_id", API_FUNCTIONS)
def test_the_session_age_is_a_parameter_of_every_function_that_checks_session_ids(
    logical_id: str,
) -> None:
    # The defect: no SessionMaxAgeSeconds parameter, so a deployment could change how
    # long a session id is accepted only by editing each function's environment by
    # hand, and ask and feedback could disagree on it (an id /ask still took that
    # /feedback refused as expired).
    assert environment(logical_id)["CANDOR_SESSION_MAX_AGE_SECONDS"] == {
        "Ref": "SessionMaxAgeSeconds"
    }
    parameter = PARAMETERS["SessionMaxAgeSeconds"]
    assert parameter["Type"] == "Number"
    assert parameter["Default"] == Settings.model_fields["session_max_age_seconds"].default


# Each number parameter bounded like the setting it sets: the parameter, the variable, the field.
BOUNDED_NUMBERS = [
    ("HistoryTtlSeconds", "CANDOR_HISTORY_TTL_SECONDS", "history_ttl_seconds"),
    ("SessionMaxAgeSeconds", "CANDOR_SESSION_MAX_AGE_SECONDS", "session_max_age_seconds"),
]


@pytest.mark.parametrize("bound", ["MinValue", "MaxValue"])
@pytest.mark.parametrize(("name", "variable", "field"), BOUNDED_NUMBERS)
def test_a_number_parameters_bounds_are_its_settings_bounds(
    name: str, variable: str, field: str, bound: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CloudFormation refuses a value outside them; the setting refuses one just past.
    value = int(PARAMETERS[name][bound])
    monkeypatch.setenv(variable, str(value))
    assert getattr(Settings(), field) == value
    past = value - 1 if bound == "MinValue" else value + 1
    monkeypatch.setenv(variable, str(past))
    with pytest.raises(ValidationError):
        Settings()


@pytest.mark.parametrize("logical_id", API_FUNCTIONS)
def test_store_questions_false_reaches_every_function_that_stores_visitor_text(
    logical_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The defect: only the ask function had CANDOR_STORE_QUESTIONS. The feedback
    # function, which serves POST /feedback, kept its default (true) and stored
    # comments and better answers though the stack was deployed with "false".
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    for name, raw in environment(logical_id).items():
        if raw == {"Ref": "StoreQuestions"}:
            monkeypatch.setenv(name, "false")

    assert Settings().store_questions is False
