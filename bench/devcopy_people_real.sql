-- mask_1g.people_real for bench/devcopy.sh: 8M rows whose values are drawn like
-- real ones (names repeat, e-mails and phones mostly distinct), 853 MB.
DROP TABLE IF EXISTS people_real;
CREATE TABLE people_real (id bigint PRIMARY KEY, email text NOT NULL, full_name text, phone text, city text, signup date);
WITH fn AS (SELECT '{James,Mary,Robert,Patricia,John,Jennifer,Michael,Linda,David,Elizabeth,William,Barbara,Richard,Susan,Joseph,Jessica,Thomas,Sarah,Charles,Karen,Christopher,Lisa,Daniel,Nancy,Matthew,Betty,Anthony,Margaret,Mark,Sandra,Donald,Ashley,Steven,Kimberly,Paul,Emily,Andrew,Donna,Joshua,Michelle,Kenneth,Carol,Kevin,Amanda,Brian,Dorothy,George,Melissa,Timothy,Deborah,Ahmed,Mei,Olga,Lars,Sofia,Hiroshi,Fatima,Mateo,Ingrid,Priya}'::text[] a),
     ln AS (SELECT '{Smith,Johnson,Williams,Brown,Jones,Garcia,Miller,Davis,Rodriguez,Martinez,Hernandez,Lopez,Gonzalez,Wilson,Anderson,Thomas,Taylor,Moore,Jackson,Martin,Lee,Perez,Thompson,White,Harris,Sanchez,Clark,Ramirez,Lewis,Robinson,Walker,Young,Allen,King,Wright,Scott,Torres,Nguyen,Hill,Flores,Green,Adams,Nelson,Baker,Hall,Rivera,Campbell,Mitchell,Carter,Roberts,Kowalski,Tanaka,Müller,Haddad,Ivanova,Larsen,Rossi,Silva,Kim,Okafor}'::text[] a),
     dom AS (SELECT '{gmail.com,yahoo.com,outlook.com,hotmail.com,icloud.com,proton.me,corp.example.com,mail.example.org}'::text[] a),
     city AS (SELECT '{London,Paris,Berlin,Madrid,Rome,Lisbon,Dublin,Vienna,Prague,Warsaw,Oslo,Helsinki,Athens,Zurich,Brussels,Amsterdam,Boston,Chicago,Denver,Seattle,Austin,Toronto,Montreal,Sydney,Tokyo,Osaka,Seoul,Mumbai,Lagos,Nairobi}'::text[] a)
INSERT INTO people_real
SELECT g, lower(f) || CASE WHEN r1 < 0.5 THEN '.' ELSE '_' END || lower(l) || (random()*9999)::int || '@' || d,
       f || ' ' || l, '+1-' || lpad((100+random()*899)::int::text, 3, '0') || '-' || lpad((random()*999)::int::text, 3, '0') || '-' || lpad((random()*9999)::int::text, 4, '0'),
       c, date '2015-01-01' + (random()*3650)::int
FROM (SELECT g, random() r1,
             (SELECT a FROM fn)[1 + (random()*59)::int] f, (SELECT a FROM ln)[1 + (random()*59)::int] l,
             (SELECT a FROM dom)[1 + (random()*7)::int] d, (SELECT a FROM city)[1 + (random()*29)::int] c
      FROM generate_series(1, 8000000) g) s;
VACUUM ANALYZE people_real;
SELECT pg_size_pretty(pg_table_size('people_real'));
SELECT * FROM people_real LIMIT 3;
