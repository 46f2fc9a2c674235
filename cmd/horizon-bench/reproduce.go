package main

import "github.com/urfave/cli/v2"

// reproduceCommand: placeholder, implemented in this file by its owner.
func reproduceCommand() *cli.Command {
	return &cli.Command{Name: "reproduce", Hidden: true, Action: func(*cli.Context) error { return usageError("reproduce: not built yet") }}
}
