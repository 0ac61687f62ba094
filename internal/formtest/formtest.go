// Package formtest is a browser that runs no script, for tests: it loads
// a page with net/http and a cookie jar, parses its HTML
// (golang.org/x/net/html), and submits a form as a browser without
// JavaScript does (HTML's "constructing the entry list": the form's named
// inputs, the one button pressed, urlencoded to the form's action),
// following redirects. A form that is hidden cannot be submitted, as a
// person cannot press a button they do not see.
package formtest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// Browser loads pages and submits their forms. Its zero value is not
// ready: use New.
type Browser struct {
	// Client is the HTTP client, with a cookie jar and the default
	// redirect policy; a test may give it a transport (TLS).
	Client *http.Client
}

// New returns a browser with an empty cookie jar.
func New() *Browser {
	jar, _ := cookiejar.New(nil)
	return &Browser{Client: &http.Client{Jar: jar}}
}

// Page is a loaded page, after every redirect.
type Page struct {
	URL    *url.URL
	Status int
	Header http.Header
	Doc    *html.Node
}

// Get loads u. An answer that is not HTML is a page with no elements.
func (b *Browser) Get(u string) (*Page, error) {
	resp, err := b.Client.Get(u)
	if err != nil {
		return nil, err
	}
	return load(resp)
}

func load(resp *http.Response) (*Page, error) {
	defer resp.Body.Close()
	doc, err := html.Parse(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", resp.Request.URL, err)
	}
	return &Page{URL: resp.Request.URL, Status: resp.StatusCode, Header: resp.Header, Doc: doc}, nil
}

// byID is the element with id, or nil.
func (p *Page) byID(id string) *html.Node {
	for n := range p.Doc.Descendants() {
		if n.Type == html.ElementNode && attr(n, "id") == id {
			return n
		}
	}
	return nil
}

// Text is the text of the element with id, its white space collapsed;
// "" when there is none.
func (p *Page) Text(id string) string {
	n := p.byID(id)
	if n == nil {
		return ""
	}
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// Visible reports whether the element with id exists and neither it nor
// an element around it has the hidden attribute.
func (p *Page) Visible(id string) bool {
	n := p.byID(id)
	if n == nil {
		return false
	}
	for ; n != nil; n = n.Parent {
		if n.Type == html.ElementNode && hasAttr(n, "hidden") {
			return false
		}
	}
	return true
}

// Form is a form of a page, with the values its controls hold.
type Form struct {
	page   *Page
	node   *html.Node
	Values url.Values // by control name; Set changes what is typed
}

// Form returns the visible form with id and its controls' values.
func (p *Page) Form(id string) (*Form, error) {
	n := p.byID(id)
	if n == nil || n.Data != "form" {
		return nil, fmt.Errorf("no form %q on %s", id, p.URL)
	}
	if !p.Visible(id) {
		return nil, fmt.Errorf("form %q on %s is hidden", id, p.URL)
	}
	f := &Form{page: p, node: n, Values: url.Values{}}
	for c := range n.Descendants() {
		if c.Type != html.ElementNode || c.Data != "input" || attr(c, "name") == "" || hasAttr(c, "disabled") {
			continue
		}
		switch strings.ToLower(attr(c, "type")) {
		case "submit", "button", "reset", "image", "file":
		case "checkbox", "radio":
			if hasAttr(c, "checked") {
				f.Values.Add(attr(c, "name"), valueOr(c, "on"))
			}
		default:
			f.Values.Add(attr(c, "name"), attr(c, "value"))
		}
	}
	return f, nil
}

// Submit presses the button with id in f, as a click does: the button's
// name and value join the form's values, which go to the form's action
// (the page's URL when it has none) by its method, and the browser
// follows the redirects. The returned page is where it ends.
func (b *Browser) Submit(f *Form, button string) (*Page, error) {
	var btn *html.Node
	for c := range f.node.Descendants() {
		if c.Type == html.ElementNode && attr(c, "id") == button {
			btn = c
		}
	}
	if btn == nil {
		return nil, fmt.Errorf("no button %q in the form", button)
	}
	if t := strings.ToLower(attr(btn, "type")); !(btn.Data == "button" && (t == "" || t == "submit") || btn.Data == "input" && t == "submit") {
		return nil, fmt.Errorf("%q is not a submit button: without a script it does nothing", button)
	}
	if hasAttr(btn, "disabled") {
		return nil, errors.New("the button is disabled")
	}
	v := url.Values{}
	for k, vs := range f.Values {
		v[k] = append([]string(nil), vs...)
	}
	if name := attr(btn, "name"); name != "" {
		v.Add(name, attr(btn, "value"))
	}
	action := f.page.URL
	if a, ok := attrOK(f.node, "action"); ok && a != "" {
		u, err := f.page.URL.Parse(a)
		if err != nil {
			return nil, fmt.Errorf("form action %q: %w", a, err)
		}
		action = u
	}
	var resp *http.Response
	var err error
	if strings.EqualFold(attr(f.node, "method"), "post") {
		resp, err = b.Client.PostForm(action.String(), v)
	} else {
		u := *action
		u.RawQuery = v.Encode()
		resp, err = b.Client.Get(u.String())
	}
	if err != nil {
		return nil, err
	}
	return load(resp)
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func attr(n *html.Node, key string) string {
	v, _ := attrOK(n, key)
	return v
}

func hasAttr(n *html.Node, key string) bool {
	_, ok := attrOK(n, key)
	return ok
}

func valueOr(n *html.Node, def string) string {
	if v, ok := attrOK(n, "value"); ok {
		return v
	}
	return def
}
