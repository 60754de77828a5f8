package mcpserver

// SDKLogs is sdkLogs, for the tests.
var SDKLogs = sdkLogs
