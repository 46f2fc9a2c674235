// Package architecture holds no code: its tests hold the repository to the
// import rules of docs/ARCHITECTURE.md, so that a change that makes a backend
// import the engine, the report side import the runtime, or the verifier
// import the runner fails CI instead of drifting the design.
package architecture
