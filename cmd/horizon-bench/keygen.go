package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/attest"
)

func keygenCommand() *cli.Command {
	return &cli.Command{
		Name:      "keygen",
		Usage:     "write an ed25519 key pair for signing editions",
		UsageText: "horizon-bench keygen --out DIR",
		Description: `Writes a new ed25519 key pair for horizon-bench attest:

   DIR/horizon.key   the private key (PKCS #8 PEM, mode 0600, not encrypted)
   DIR/horizon.pub   the public key (PKIX PEM): publish it; readers pass it
                     to horizon-verify --trusted-key

and prints the key id (the hex SHA-256 of the raw public key), which every
signature made with the key records. DIR is created (mode 0700) if needed.
An existing key file is never overwritten: keygen refuses and writes nothing.

Sign an edition and verify it against the key:

   horizon-bench keygen --out ~/.horizon &&
   horizon-bench attest editions/smoke-cpu --key ~/.horizon/horizon.key &&
   horizon-verify editions/smoke-cpu --trusted-key ~/.horizon/horizon.pub

Exit status: 0 written; 2 bad arguments or a key file already there; 1 any
other failure.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "write horizon.key and horizon.pub into `DIR`"},
		},
		Action: runKeygen,
	}
}

func runKeygen(c *cli.Context) error {
	if c.NArg() != 0 {
		return usageError("keygen: unexpected argument %q (keygen --out DIR)", c.Args().First())
	}
	dir := c.String("out")
	if dir == "" {
		return usageError("keygen: where? e.g. horizon-bench keygen --out ~/.horizon")
	}
	privPath, pubPath, id, err := attest.WriteKeyPair(dir)
	if errors.Is(err, attest.ErrKeyExists) {
		return usageError("keygen: %v", err)
	}
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "wrote %s (private, mode 0600: keep it secret)\nwrote %s (public: give it to readers for horizon-verify --trusted-key)\nkey id %s\n",
		privPath, pubPath, id)
	return nil
}
