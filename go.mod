module github.com/aerie-mq/aerie

go 1.26.8
