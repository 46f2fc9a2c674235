package main

import "github.com/urfave/cli/v2"

// keygenCommand: placeholder, implemented in this file by its owner.
func keygenCommand() *cli.Command {
	return &cli.Command{Name: "keygen", Hidden: true, Action: func(*cli.Context) error { return usageError("keygen: not built yet") }}
}
