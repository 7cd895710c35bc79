module github.com/queengo/queengo/bench

go 1.26.8

replace github.com/queengo/queengo => ../

require (
	github.com/nats-io/nats.go v1.56.0
	github.com/queengo/queengo v0.0.0-00010101000000-000000000000
	github.com/rabbitmq/amqp091-go v1.17.0
	github.com/valyala/fasthttp v1.79.0
	github.com/valyala/fastjson v1.6.10
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
