package main

import (
	"encoding/json"
	"io"

	"github.com/horizon-runmap/horizon/verifier"
)

// The --json stream: one JSON object per line. Every finding is
//
//	{"message_type":"finding","check":...,"id":...,"severity":"error"|"hint",
//	 "file":...,"pointer":...,"expected":...,"found":...,"message":...}
//
// and the last line is the summary:
//
//	{"message_type":"summary","dir":...,"edition":...,"result":"pass"|"fail"|"unreadable",
//	 "exit_code":0..3,"errors":N,"hints":N,"checks":[{"check","status","errors","hints"}...],
//	 "files":N,"configurations":N,"raw_records":N,"requests":N,"claims":N}

type jsonFinding struct {
	MessageType string `json:"message_type"`
	verifier.Finding
}

type jsonSummary struct {
	MessageType string `json:"message_type"`
	verifier.Summary
	ExitCode int `json:"exit_code"`
}

func writeJSON(w io.Writer, rep *verifier.Report, code int) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, f := range rep.Findings {
		if err := enc.Encode(jsonFinding{MessageType: "finding", Finding: f}); err != nil {
			return err
		}
	}
	return enc.Encode(jsonSummary{MessageType: "summary", Summary: rep.Summary(), ExitCode: code})
}
