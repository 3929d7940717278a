#!/usr/bin/env bash
# DynamoDB Local: the jar inside the npm package amplify-dynamodb-simulator, run
# with the machine's Java (17 or later). Installed once into .candor/dynamodb-local/.
#
#   scripts/dynamodb-local.sh install   install if missing; print the emulator folder
#   scripts/dynamodb-local.sh [PORT]    install if missing, start in memory on PORT
#                                       (default 8100), wait until it answers, print
#                                       the endpoint, and run until interrupted
#
# The tests and `make stress` start their own server on a free port and stop it;
# this script is for trying the DynamoDB state store by hand:
#   CANDOR_STATE_BACKEND=dynamodb CANDOR_STATE_TABLE=... \
#   CANDOR_DYNAMODB_ENDPOINT_URL=http://127.0.0.1:8100 candor serve
set -euo pipefail

VERSION=2.9.30
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${CANDOR_DYNAMODB_LOCAL_PREFIX:-$ROOT/.candor/dynamodb-local}
EMULATOR=$PREFIX/node_modules/amplify-dynamodb-simulator/emulator

install() {
    if [[ ! -f $EMULATOR/DynamoDBLocal.jar ]]; then
        echo "installing DynamoDB Local (npm amplify-dynamodb-simulator@$VERSION) into $PREFIX" >&2
        mkdir -p "$PREFIX"
        npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
            "amplify-dynamodb-simulator@$VERSION" >&2
    fi
    [[ -f $EMULATOR/DynamoDBLocal.jar ]] || { echo "no DynamoDBLocal.jar in $EMULATOR" >&2; exit 1; }
}

if [[ ${1:-} == install ]]; then
    install
    echo "$EMULATOR"
    exit 0
fi

PORT=${1:-8100}
command -v java >/dev/null || { echo "DynamoDB Local needs java on PATH" >&2; exit 1; }
install
cd "$EMULATOR"
java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
    -inMemory -sharedDb -disableTelemetry -port "$PORT" >&2 &
JAVA=$!
trap 'kill "$JAVA" 2>/dev/null; wait "$JAVA" 2>/dev/null' EXIT INT TERM

# Ready when it answers HTTP: any response (400 without credentials) will do.
for _ in $(seq 1 120); do
    if ! kill -0 "$JAVA" 2>/dev/null; then
        echo "DynamoDB Local exited at start" >&2
        exit 1
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
        echo "http://127.0.0.1:$PORT"
        wait "$JAVA"
        exit 0
    fi
    sleep 0.5
done
echo "DynamoDB Local did not start listening on port $PORT within 60 s" >&2
exit 1
