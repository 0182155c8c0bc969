// Package arch holds tests of the repository's structure: which packages may
// import what (DESIGN.md §2). It has no code of its own.
package arch
