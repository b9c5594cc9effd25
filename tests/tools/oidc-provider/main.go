// A real OpenID provider for outfit's sign-in tests: zitadel/oidc's example provider (its login
// form, in-memory users and tokens, RSA-signed ID tokens, discovery and JWKS), with the users, the
// client and the issuer a test gives it, and a groups claim in the ID token, which the example's
// storage does not carry.
//
//	oidc-provider -listen 127.0.0.1:0 -users users.json -client-id outfit -client-secret s \
//	    -redirect-uri http://127.0.0.1:8080/auth/callback
//
// users.json maps an id to the example's User fields plus "Groups". The first line printed on
// stdout is the issuer URL, once it listens.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// withClaims is the example's storage, with the user's name, email and groups in every ID token
// (as Keycloak and Dex put them there), not only in the userinfo answer.
type withClaims struct {
	*storage.Storage
	users map[string]extraClaims
}

type extraClaims struct {
	Username string
	Email    string
	Groups   []string
}

func (s withClaims) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, request op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, request, scopes); err != nil {
		return err
	}
	user, ok := s.users[request.GetSubject()]
	if !ok {
		return fmt.Errorf("no user %q", request.GetSubject())
	}
	info.PreferredUsername = user.Username
	info.Email = user.Email
	info.EmailVerified = true
	info.AppendClaims("groups", user.Groups)
	return nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	usersFile := flag.String("users", "", "JSON file of users (id -> the example's User fields and Groups)")
	clientID := flag.String("client-id", "outfit", "the one client's id")
	clientSecret := flag.String("client-secret", "", "the one client's secret")
	redirectURIs := flag.String("redirect-uri", "", "the client's redirect URIs, comma-separated")
	flag.Parse()
	if *usersFile == "" || *clientSecret == "" || *redirectURIs == "" {
		fmt.Fprintln(os.Stderr, "oidc-provider: -users, -client-secret and -redirect-uri are required")
		os.Exit(2)
	}
	text, err := os.ReadFile(*usersFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidc-provider:", err)
		os.Exit(2)
	}
	extra := map[string]extraClaims{}
	if err := json.Unmarshal(text, &extra); err != nil {
		fmt.Fprintln(os.Stderr, "oidc-provider: users:", err)
		os.Exit(2)
	}
	users, err := storage.StoreFromFile(*usersFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidc-provider: users:", err)
		os.Exit(2)
	}
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidc-provider:", err)
		os.Exit(1)
	}
	issuer := fmt.Sprintf("http://%s/", listener.Addr())
	storage.RegisterClients(storage.WebClient(*clientID, *clientSecret, strings.Split(*redirectURIs, ",")...))
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	router := exampleop.SetupServer(issuer, withClaims{storage.NewStorage(users), extra}, logger, false)
	fmt.Println(issuer)
	if err := http.Serve(listener, router); err != nil {
		fmt.Fprintln(os.Stderr, "oidc-provider:", err)
		os.Exit(1)
	}
}
