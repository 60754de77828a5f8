package memory

import (
	"errors"
	"fmt"
)

// Error codes. They are the API's error codes, so the HTTP layer can map them to
// statuses in one table and clients see the same words the server uses.
const (
	EINVALID      = "invalid_request"
	EUNAUTHORIZED = "unauthorized"
	EFORBIDDEN    = "forbidden"
	ENOTFOUND     = "not_found"
	ECONFLICT     = "conflict"
	ETOOLARGE     = "too_large"
	ERATELIMITED  = "rate_limited"
	EUNAVAILABLE  = "unavailable"
	EINTERNAL     = "internal"
	// EDAMAGED is stored data that fails its checksum or cannot be read
	// (disk damage): not a bug and not worth a retry, but a 5xx all the
	// same, naming what is damaged so an operator can act on it.
	EDAMAGED = "data_damaged"
)

// DamagedRecord is a stored message record that fails its checksum or does
// not decode. Tenant and SessionID are empty when even its key is damaged;
// MessageID is set when the reader knew which message it wanted.
type DamagedRecord struct {
	Tenant, SessionID, MessageID string
	Seq                          uint64
	Err                          error
}

func (e *DamagedRecord) Error() string { return EDAMAGED + ": " + e.describe() + ": " + e.Err.Error() }

func (e *DamagedRecord) Unwrap() error { return e.Err }

// describe names the record for people: the message id when known, its
// session and its place in it.
func (e *DamagedRecord) describe() string {
	what := "a stored message"
	if e.MessageID != "" {
		what = "stored message " + e.MessageID
	}
	if e.SessionID != "" {
		what += fmt.Sprintf(" (session %s, seq %d)", e.SessionID, e.Seq)
	}
	return what + " is damaged on disk"
}

// Error is a domain error: a code a program can act on and a message a person can.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or EINTERNAL.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var d *DamagedRecord
	if errors.As(err, &d) {
		return EDAMAGED
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the user-facing message of err. Internal errors are not
// described to callers: their text may hold paths and other details.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var d *DamagedRecord
	if errors.As(err, &d) {
		return d.describe() + " (" + d.Err.Error() + "); the rest of the data is served: " +
			"restore it from a backup or delete it, and run `ctxd verify` on the stopped server"
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
