package memory

import "context"

type contextKey int

const (
	tenantKey contextKey = iota + 1
	requestIDKey
)

// DefaultTenant owns all data when no API keys are configured.
const DefaultTenant = "default"

// NewContextWithTenant returns a context that carries the caller's tenant.
// Every store and index operation is scoped to it.
func NewContextWithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey, tenant)
}

// TenantFromContext returns the caller's tenant, DefaultTenant if none was set.
func TenantFromContext(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey).(string); ok && t != "" {
		return t
	}
	return DefaultTenant
}

// NewContextWithRequestID returns a context carrying a request id for logs.
func NewContextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestIDFromContext returns the request id, or "".
func RequestIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}
