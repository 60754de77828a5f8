package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/ctxd/ctxd/client"
)

// Exit codes of the ctxd binary: the one table (README "## CLI" lists it).
const (
	exitOK          = 0
	exitServer      = 1 // the server failed (5xx, 429), or any other error
	exitUsage       = 2 // bad flags or arguments, or the server refused the request as invalid (400, 413)
	exitNotFound    = 3 // 404: no such session or message
	exitAuth        = 4 // 401 or 403: missing, wrong or insufficient API key
	exitConflict    = 5 // 409
	exitUnreachable = 6 // no answer from the server: not running, wrong --server, timed out
	exitAborted     = 7 // a confirmation was refused or could not be asked
)

// usageError is a mistake in how the binary was called.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// abortedError is an operation the user did not confirm.
type abortedError struct{ msg string }

func (e *abortedError) Error() string { return e.msg }

// exitCode maps an error from a verb to the process's exit code.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var (
		usage   *usageError
		aborted *abortedError
		api     *client.Error
		unreach *unreachableError
	)
	switch {
	case errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &aborted):
		return exitAborted
	case errors.As(err, &unreach):
		return exitUnreachable
	case errors.As(err, &api):
		return exitCodeOfStatus(api.Status)
	case isCobraUsage(err):
		return exitUsage
	}
	return exitServer
}

func exitCodeOfStatus(status int) int {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return exitUsage
	case http.StatusNotFound:
		return exitNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		return exitAuth
	case http.StatusConflict:
		return exitConflict
	}
	return exitServer
}

// isCobraUsage recognises the errors cobra builds itself before any verb
// runs (an unknown verb, a missing required flag): they have no type.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command ", "required flag(s) ", "unknown flag", "unknown shorthand flag", "invalid argument "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// reportError prints err for a person and returns the exit code.
func reportError(w io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(w, "ctxd:", err)
	return exitCode(err)
}
