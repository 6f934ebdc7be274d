// Package canonjsontest holds the JSON corpus the hash tests run over: the canonical
// form's bytes are stored as hashes in the database, so every package that hashes JSON
// pins its output on the same varied inputs.
package canonjsontest

// Corpus is varied JSON text: nested objects, unicode and escapes, numbers as written
// (big integers, floats, exponents, negative zero), HTML characters, empty values,
// whitespace, trailing data, duplicate keys, invalid UTF-8 and text that is not JSON.
var Corpus = []string{
	``,
	`   `,
	`{}`,
	`[]`,
	`null`,
	`true`,
	`false`,
	`""`,
	`0`,
	`{"":""}`,
	`{"a":{},"b":[],"c":null,"d":"","e":0,"f":false}`,
	`  { "b" : 1 ,  "a" : [ 1 , 2 ] }  `,
	"{\n\t\"z\": {\"y\": {\"x\": [3, {\"b\": 2, \"a\": 1}]}},\r\n\t\"a\": \"first\"\n}",
	`{"type":"object","properties":{"path":{"type":"string","description":"where"},"n":{"type":"integer","minimum":1}},"required":["path"]}`,
	`{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false,"title":"Read"}`,
	`{"ü":"ñ","日本":"語","emoji":"😀","Ä":1,"a":2,"Z":3,"_":4,"~":5}`,
	`{"esc":"\u0000\u0001\u001f\b\f\n\r\t\\\"\/","slash":"a/b","uni":"\u00e9\u4e2d\ud83d\ude00"}`,
	`{"line":"\u2028 and \u2029","del":"\u007f","nbsp":"\u00a0","bom":"\ufeff"}`,
	`{"lone":"\ud800","low":"\udc00","pair":"\ud83d\ude00"}`,
	"{\"bad\":\"\xff\xfe\",\"cut\":\"\xe6\x97\"}",
	`{"html":"<script>alert('x') && 1 > 0</script>","<k>":"&amp;"}`,
	`{"big":12345678901234567890123456789,"neg":-98765432109876543210,"max":9007199254740993}`,
	`{"f":1.0,"g":0.1,"h":-0.0,"i":-0,"j":3.14159265358979323846264338327950288}`,
	`{"e1":1e10,"e2":1E+2,"e3":-1.5e-10,"e4":1e400,"e5":2.5E-400,"e6":1.7976931348623157e308}`,
	`[1,-1,0.5,1e0,100,1.00,"1",null,true,[],{}]`,
	`{"a":1,"a":2}`,
	`{"a":{"x":1},"a":{"y":2}}`,
	`[[[[[[[[[[{"deep":[[[[{"deeper":true}]]]]}]]]]]]]]]]`,
	`{"arr":[{"b":1,"a":2},{"d":[{"f":1,"e":2}],"c":3}]}`,
	`"just a string with <html> & \"quotes\""`,
	`12345678901234567890`,
	`{"a":1} {"b":2}`,
	`{"a":1} trailing`,
	`{`,
	`nope`,
	`{"a":}`,
	`[1,2`,
	`{'single':1}`,
}
