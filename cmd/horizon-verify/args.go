package main

import "strings"

// valueFlags are the flags that take a value in the next argument.
var valueFlags = map[string]bool{"schemas": true, "contract": true, "campaign": true, "trusted-key": true, "reproduction": true}

// interspersed moves flags that follow the edition directory in front of it,
// so that "horizon-verify <dir> --json" works: urfave/cli v2 (like package
// flag) stops parsing flags at the first positional argument. Everything
// after "--" stays positional.
func interspersed(args []string) []string {
	if len(args) == 0 {
		return args
	}
	var flags, pos []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if valueFlags[name] && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
			continue
		}
		pos = append(pos, a)
	}
	out := append([]string{args[0]}, flags...)
	if len(pos) > 0 {
		out = append(out, "--")
		out = append(out, pos...)
	}
	return out
}
