// Package arch holds tests of the repository's structure: which packages may
// import what (docs/ARCHITECTURE.md), and that the docs and comments cite
// only documents the repository contains. It has no code of its own.
package arch
