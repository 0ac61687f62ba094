// Package controlv1 is the generated Go code for the cocoonbox.control.v1
// API: the Boxes, Session and Account services. Regenerate with `make proto`.
package controlv1

//go:generate sh -c "protoc --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) --plugin=protoc-gen-go-grpc=$(go tool -n protoc-gen-go-grpc) -I ../../../.. --go_out=../../../.. --go_opt=paths=source_relative --go-grpc_out=../../../.. --go-grpc_opt=paths=source_relative proto/cocoonbox/control/v1/boxes.proto proto/cocoonbox/control/v1/session.proto proto/cocoonbox/control/v1/account.proto"
