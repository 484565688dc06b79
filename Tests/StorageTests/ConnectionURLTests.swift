import Storage
import Testing

@Suite("ConnectionURL: secrets in a connection URL are masked before a message or log shows it")
struct ConnectionURLTests {
    @Test(
        "passwords, lone tokens and password parameters are masked; the rest stays for the operator",
        arguments: [
            ("nats://relay:s3cret@10.0.0.5:4222", "nats://relay:xxxxx@10.0.0.5:4222"),
            ("nats://s3cret@nats.internal:4222", "nats://xxxxx@nats.internal:4222"),
            ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
            ("postgres://pixie:s3cret@db/pixie", "postgres://pixie:xxxxx@db/pixie"),
            ("postgresql://db/pixie?user=pixie&password=s3cret", "postgresql://db/pixie?user=pixie&password=xxxxx"),
            (
                "postgres://pixie:s3cret@db/pixie?sslpassword=s3cret",
                "postgres://pixie:xxxxx@db/pixie?sslpassword=xxxxx"
            ),
            ("not a url s3cret", "(a URL that does not parse)"),
        ])
    func redacted(given: String, shown: String) {
        #expect(ConnectionURL.redacted(given) == shown)
        #expect(!ConnectionURL.redacted(given).contains("s3cret"))
    }
}
