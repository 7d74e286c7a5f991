import ForecastService
import Logging

// Listens on $HOST:$PORT (127.0.0.1:8080) and calls the weather API at $UPSTREAM_URL; stops
// gracefully on SIGTERM or SIGINT, letting the requests in flight finish.
var logger = Logger(label: "forecast-service")
logger.logLevel = .info
let app = try buildApplication(.fromEnvironment(), logger: logger)
try await app.runService()
