package headers_test

import (
	"context"
	"fmt"

	"github.com/mcp-mux/mcp-mux/internal/headers"
)

func ExampleResolver_ForCall() {
	r, err := headers.New(headers.Options{
		Server:   "openviking",
		Static:   map[string]string{"X-API-Key": "shared-key", "authorization": "Bearer discovery-only"},
		UserAuth: &headers.UserAuthOptions{Users: map[string]string{"alice": "Bearer alice-token"}},
		FromContext: &headers.FromContextOptions{
			Headers: map[string]string{"x-api-key": "openviking_key"},
		},
	})
	if err != nil {
		panic(err)
	}
	defer r.Close()

	h, err := r.ForCall(context.Background(), "alice", map[string]string{"openviking_key": "alice-key"})
	fmt.Println(h["authorization"], h["X-API-Key"], err)

	_, err = r.ForCall(context.Background(), "bob", map[string]string{"openviking_key": "k"})
	fmt.Println(err)
	// Output:
	// [Bearer alice-token] [alice-key] <nil>
	// No credential is configured for your account (user id 'bob') on MCP server 'openviking'. Ask the operator to add this exact id to that server's user_auth.users map (or set its environment variable).
}

func ExampleParseSecrets() {
	m, err := headers.ParseSecrets("X-Mux-Secrets", "eyJhcGlfa2V5IjoiazEifQ") // base64url of {"api_key":"k1"}
	fmt.Println(m, err)
	_, err = headers.ParseSecrets("X-Mux-Secrets", `{"api_key": 1}`)
	fmt.Println(err)
	// Output:
	// map[api_key:k1] <nil>
	// secrets header "X-Mux-Secrets" must map names to strings, but a value is not a string
}
