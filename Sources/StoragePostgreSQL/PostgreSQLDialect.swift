import Storage
/// Our SQL as PostgreSQL takes it (docs/storage.md, "Conventions for service SQL").
///
/// The services write SQL both engines accept, with SQLite's spelling in three places, which this rewrites
/// outside string literals, quoted identifiers and comments:
/// - each positional `?` becomes `$1`, `$2`, ... in order;
/// - the type name `BLOB` becomes `BYTEA`;
/// - the type name `INTEGER` becomes `BIGINT`: a SQLite INTEGER holds 64 bits, PostgreSQL's only 32;
/// - the type name `REAL` becomes `DOUBLE PRECISION`: a SQLite REAL is 8 bytes, PostgreSQL's 4 (credential-svc's
///   token buckets hold fractions of a token in one).
///
/// Words are matched whole and case-insensitively, so a column named `blob_id` or `integer_count` is left alone.
enum PostgreSQLDialect {
    /// `sql` rewritten, how many placeholders it has, and whether anything but a trailing `;` ends a statement
    /// in it (a script).
    static func rewrite(_ sql: String) -> (sql: String, placeholders: Int, isScript: Bool) {
        var output = ""
        output.reserveCapacity(sql.utf8.count + 16)
        var placeholders = 0
        let scalars = Array(sql.unicodeScalars)
        var index = 0
        var word = ""
        var ended = false
        var isScript = false

        func flushWord() {
            guard !word.isEmpty else { return }
            switch word.uppercased() {
            case "BLOB": output += "BYTEA"
            case "INTEGER": output += "BIGINT"
            case "REAL": output += "DOUBLE PRECISION"
            default: output += word
            }
            word = ""
        }

        /// Copies scalars up to and including the one that ends a literal opened by `quote` (a doubled quote is
        /// an escaped one and does not end it).
        func copyQuoted(_ quote: Unicode.Scalar) {
            output.unicodeScalars.append(scalars[index])
            index += 1
            while index < scalars.count {
                let scalar = scalars[index]
                output.unicodeScalars.append(scalar)
                index += 1
                if scalar == quote {
                    if index < scalars.count, scalars[index] == quote {
                        output.unicodeScalars.append(scalars[index])
                        index += 1
                    } else {
                        return
                    }
                }
            }
        }

        while index < scalars.count {
            let scalar = scalars[index]
            if ended, !scalar.properties.isWhitespace, scalar != ";" { isScript = true }
            if scalar.properties.isAlphabetic || scalar == "_"
                || (!word.isEmpty && scalar.properties.numericType != nil)
            {
                word.unicodeScalars.append(scalar)
                index += 1
                continue
            }
            flushWord()
            let next = index + 1 < scalars.count ? scalars[index + 1] : nil
            switch scalar {
            case "'", "\"":
                copyQuoted(scalar)
            case "-" where next == "-":
                while index < scalars.count, scalars[index] != "\n" {
                    output.unicodeScalars.append(scalars[index])
                    index += 1
                }
            case "/" where next == "*":
                output += "/*"
                index += 2
                while index < scalars.count {
                    if scalars[index] == "*", index + 1 < scalars.count, scalars[index + 1] == "/" {
                        output += "*/"
                        index += 2
                        break
                    }
                    output.unicodeScalars.append(scalars[index])
                    index += 1
                }
            case ";":
                ended = true
                output.unicodeScalars.append(scalar)
                index += 1
            case "?":
                placeholders += 1
                output += "$\(placeholders)"
                index += 1
            default:
                output.unicodeScalars.append(scalar)
                index += 1
            }
        }
        flushWord()
        return (output, placeholders, isScript)
    }
}
