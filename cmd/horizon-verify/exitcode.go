package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/verifier"
)

// Exit codes. They are decided in exactly one place (exitCode, and
// exitCodeOf for errors) and documented from one table (exitCodes), which
// --help prints.
const (
	exitPass       = 0 // every check passed; hints may remain
	exitFail       = 1 // at least one error finding
	exitUsage      = 2 // bad flags or arguments (or a --schemas directory that does not compile)
	exitUnreadable = 3 // the edition cannot be read: no such directory, or no decodable manifest.json
)

var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitPass, "the edition passed every check (hints may remain: they are listed)"},
	{exitFail, "at least one error finding: the edition is wrong"},
	{exitUsage, "usage: bad flags or arguments, or an unusable --schemas directory"},
	{exitUnreadable, "the edition cannot be read (no such directory, manifest.json missing or undecodable)"},
}

// exitCode maps a verification to the exit code.
func exitCode(rep *verifier.Report, err error) int {
	switch {
	case errors.Is(err, verifier.ErrUnreadable) || (rep != nil && rep.Unreadable()):
		return exitUnreadable
	case err != nil:
		return exitUnreadable // Verify reports nothing else as an error
	case !rep.Passed():
		return exitFail
	default:
		return exitPass
	}
}

// exitCodeOf maps an error returned by the app to the exit code: cli.Exit
// errors carry theirs, anything else is a usage problem (urfave/cli's own
// flag errors).
func exitCodeOf(err error) int {
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return exitUsage
}

func usageError(format string, args ...any) error {
	return cli.Exit(fmt.Sprintf(format, args...), exitUsage)
}

func exitCodeHelp() string {
	var b strings.Builder
	b.WriteString("EXIT CODES:\n")
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "   %d  %s\n", e.code, e.meaning)
	}
	return b.String()
}
