#!/bin/bash
# The ask function's start-up command (its Handler in infra/template.yaml).
#
# The Lambda Web Adapter layer's /opt/bootstrap (AWS_LAMBDA_EXEC_WRAPPER) runs this
# script at cold start, waits until GET /health answers on AWS_LWA_PORT, then
# hands each API Gateway request to the app on loopback and streams the response
# back (AWS_LWA_INVOKE_MODE=response_stream). The app is app.py's: the library's
# create_app, as `candor serve` runs it, wrapped so that each request is handled
# as one invocation (candor.api.lambda_web).
#
# /opt/python holds the candor layer's packages; LAMBDA_TASK_ROOT this folder.
# Only the adapter can reach 127.0.0.1 inside the execution environment, and the
# client address comes from API Gateway's request context, not from
# X-Forwarded-For: hence --no-proxy-headers.
set -euo pipefail
cd "${LAMBDA_TASK_ROOT:-$(dirname "$0")}"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/opt/python:$PWD"
exec python -m uvicorn app:web \
    --host 127.0.0.1 \
    --port "${AWS_LWA_PORT:-8080}" \
    --no-proxy-headers \
    --no-server-header \
    --no-access-log \
    --lifespan off
