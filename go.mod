module github.com/aerie-mq/aerie

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/cockroachdb/datadriven v1.0.3
)

require github.com/pmezard/go-difflib v1.0.0 // indirect
