"""HTTP API: FastAPI routers shared by `candor serve` and the Lambda handlers."""
